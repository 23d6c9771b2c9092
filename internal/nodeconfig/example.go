package nodeconfig

import (
	"fmt"
	"time"

	toml "github.com/pelletier/go-toml/v2"
)

// Example returns a commented example configuration: every key, the
// optional ones commented out at their defaults. It parses (a test checks
// it, and that testdata/example.toml is this text).
func Example() string { return example }

const example = `# Cacheon validator configuration: cacheon validator run --config FILE
#
# Relative paths are relative to this file's directory. Only data, chain,
# arena and referee.calibration are required; the keys commented out show
# their defaults. A key left out, or a string set to "", takes its default.
# Durations are Go durations ("2s", "10m", "1h30m"); decimals are strings.
# Unknown keys are errors.

# The validator's store: a directory (SQLite) or a postgres:// URL.
data = "state"
# Where fetched bundles are kept (default DATA/bundles; required with a
# postgres:// store).
# work = "state/bundles"
# The chain node's http:// or https:// URL.
chain = "http://127.0.0.1:9944"
# The arena: a shipped arena's name, or an arena file (a path with a "/" or
# a .toml suffix).
arena = "cpu-tiny"
# Interpreter with torch: a command name, or a path ("" looks for
# $CACHEON_PYTHON, the first python3 on PATH that imports torch,
# /usr/bin/python3).
# python = ""
# Fetch archives over plain http:// from loopback (a local devnet only).
# allow_loopback_http = false
# Address of the metrics, health and dashboard HTTP server ("" = none).
listen = "127.0.0.1:9464"
# Logging: log_format is text or json; log_level debug, info, warn or error.
# log_format = "text"
# log_level = "info"
# How often the loop runs a pass when it is idle.
# poll = "2s"

[referee]
# The device group the referee serves and the name it holds leases under.
# group = "local0"
# holder = "referee-1"
# The arena's calibration record (cacheon calibrate -o FILE).
calibration = "calibration.json"
# The evidence store directory (default DATA/evidence; required with a
# postgres:// store).
# evidence = "state/evidence"
# How long a qualification lease lasts without a heartbeat.
# lease_ttl = "10m"
# Timed and warm-up waves per read (0: the arena's).
# waves = 0
# warmup = 0
# Prompts the pristine teacher T scores (at least 2).
# t_prompts = 8
# The share of the candidate's calls in the audit engine's timed waves that
# are dumped and regraded (a decimal in [0, 1]; at most 64 calls, the last
# one always), and the fewest audited calls of each slot an attempt needs.
# audit_share = "0.25"
# min_audited = 2
# Limits: building the model and capturing graphs; one wave.
# load_timeout = "15m"
# wave_time = "10m"

[settlement]
# The name the settler holds its lease under, and how long the lease lasts.
# holder = "settler-1"
# lease_ttl = "1m"

[weights]
# The validator's hotkey file ("" publishes no weights). With a key, the
# burn target gets the weight when no claim has credit: burn_hotkey (64
# lowercase hex digits) is required and must be what the metagraph shows on
# burn_uid.
# key = "hotkey.key"
# burn_uid = 0
# burn_hotkey = ""
# Blocks after which a claim keeps half its credit; finalized blocks between
# two publications; blocks after its projection by which the chain must show
# a publication.
# half_life = 7200
# interval = 100
# deadline = 50

[intake]
# Optional caps; 0 or absent is the intake's default.
# pending_cap = 0
# hotkey_epoch_cap = 0
# epoch_blocks = 0
# sla_blocks = 0
# fetch_attempts = 0
# qualify_retries = 0

# A generation-0 incumbent under the settled stack, one table per target
# (on a devnet, a deliberately slow kernel). bundle is a bundle directory.
# [[base]]
# target = "activation.silu_and_mul"
# bundle = "bases/silu_and_mul"
`

// Marshal writes c as a configuration document with every key spelled out
// (defaults included, paths as resolved): Parse of the result, from any
// directory, gives c again when c's paths are absolute.
func (c *Config) Marshal() ([]byte, error) {
	raw := rawConfig{
		Data: c.Data, Work: c.Work, Chain: c.Chain, Arena: c.Arena, Python: c.Python,
		AllowLoopbackHTTP: c.AllowLoopbackHTTP, Listen: c.Listen, LogFormat: c.LogFormat, LogLevel: c.LogLevel,
		Poll: durationText(c.Poll),
		Referee: rawReferee{
			Group: c.Referee.Group, Holder: c.Referee.Holder, Calibration: c.Referee.Calibration, Evidence: c.Referee.Evidence,
			LeaseTTL: durationText(c.Referee.LeaseTTL), Waves: int64(c.Referee.Waves), Warmup: int64(c.Referee.Warmup),
			TPrompts: int64(c.Referee.TPrompts), AuditShare: c.Referee.AuditShare, MinAudited: int64(c.Referee.MinAudited),
			LoadTimeout: durationText(c.Referee.LoadTimeout), WaveTime: durationText(c.Referee.WaveTime),
		},
		Settlement: rawSettlement{Holder: c.Settlement.Holder, LeaseTTL: durationText(c.Settlement.LeaseTTL)},
		Weights: rawWeights{Key: c.Weights.Key, BurnUID: int64(c.Weights.BurnUID), BurnHotkey: c.Weights.BurnHotkey,
			HalfLife: int64(c.Weights.HalfLife), Interval: int64(c.Weights.Interval), Deadline: int64(c.Weights.Deadline)},
		Intake: rawIntake{PendingCap: int64(c.Intake.PendingCap), HotkeyEpochCap: int64(c.Intake.HotkeyEpochCap),
			EpochBlocks: int64(c.Intake.EpochBlocks), SLABlocks: int64(c.Intake.SLABlocks), FetchAttempts: int64(c.Intake.FetchAttempts),
			QualifyRetries: int64(c.Intake.QualifyRetries)},
	}
	for _, b := range c.Base {
		raw.Base = append(raw.Base, rawBase(b))
	}
	out, err := toml.Marshal(raw)
	if err != nil {
		return nil, fmt.Errorf("marshal configuration: %w", err)
	}
	return out, nil
}

// durationText is d as Parse reads it; "" (the default) for zero.
func durationText(d time.Duration) string {
	if d == 0 {
		return ""
	}
	return d.String()
}
