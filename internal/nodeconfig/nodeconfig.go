// Package nodeconfig provides the validator's configuration file (the one
// TOML file `cacheon validator run --config FILE` reads): its schema, its
// strict parsing and validation, its defaults and a commented example.
//
// Parsing is strict: an unknown key, a key written in another case, a value
// of the wrong type or an invalid value is an error that names the file, the
// line and column (when known) and the key path, e.g.
//
//	validator.toml:12:1: referee.lease_ttl: "-1s" is not a positive duration
//
// Durations are Go duration strings ("2s", "10m"), decimals are strings
// ("0.25"). A key left out, or a string written as "", takes its default.
// Relative paths are resolved against the configuration file's directory,
// never the process's working directory; a postgres:// store, the chain URL,
// a shipped arena name and a bare interpreter name (looked up in PATH) are
// left as written.
package nodeconfig

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"cacheon/internal/fielderr"
)

// maxFileBytes bounds a configuration file.
const maxFileBytes = 1 << 20

// Defaults.
const (
	DefaultLogFormat          = "text"
	DefaultLogLevel           = "info"
	DefaultPoll               = 2 * time.Second
	DefaultRefereeGroup       = "local0"
	DefaultRefereeHolder      = "referee-1"
	DefaultRefereeLeaseTTL    = 10 * time.Minute
	DefaultTPrompts           = 8
	DefaultAuditShare         = "0.25"
	DefaultMinAudited         = 2
	DefaultLoadTimeout        = 15 * time.Minute
	DefaultWaveTime           = 10 * time.Minute
	DefaultSettlementHolder   = "settler-1"
	DefaultSettlementLeaseTTL = time.Minute
	DefaultHalfLife           = 7200
	DefaultInterval           = 100
	DefaultDeadline           = 50
)

// Config is a validated configuration with its defaults applied and its
// paths resolved.
type Config struct {
	// Data is the store: an absolute directory (SQLite) or a postgres:// or
	// postgresql:// URL.
	Data string
	// Work is the bundles work directory (default DATA/bundles; required
	// when Data is a postgres URL).
	Work string
	// Chain is the chain node's http:// or https:// URL.
	Chain string
	// Arena is a shipped arena's name (a bare name: no "/", no .toml
	// suffix) or an absolute arena file path.
	Arena string
	// Python is the interpreter with torch: "" (the default lookup), a bare
	// command name, or an absolute path.
	Python string
	// AllowLoopbackHTTP lets archives be fetched over plain http:// from
	// loopback (a local devnet).
	AllowLoopbackHTTP bool
	// Listen is the host:port of the metrics, health and dashboard HTTP
	// server; "" serves none.
	Listen string
	// LogFormat is "text" or "json"; LogLevel "debug", "info", "warn" or
	// "error".
	LogFormat, LogLevel string
	// Poll is how often the loop runs a pass when idle.
	Poll       time.Duration
	Referee    RefereeSection
	Settlement SettlementSection
	Weights    WeightsSection
	Intake     IntakeSection
	// Base holds the generation-0 incumbents, one per target (nil: none).
	Base []BaseEntry
}

// RefereeSection is [referee]: the referee that takes the validator's
// qualification work.
type RefereeSection struct {
	Group       string        // device group (default "local0")
	Holder      string        // lease holder name (default "referee-1")
	Calibration string        // the arena's calibration record (required)
	Evidence    string        // evidence store directory (default DATA/evidence; required with postgres)
	LeaseTTL    time.Duration // qualification lease (default 10m)
	Waves       int           // timed waves per read, 0..1000 (0: the arena's)
	Warmup      int           // warm-up waves per read, 0..100 (0: the arena's)
	TPrompts    int           // prompts the teacher T scores, >= 2 (default 8)
	AuditShare  string        // canonical decimal in [0, 1] (default "0.25")
	MinAudited  int           // fewest audited calls for a pass, >= 0 (default 2)
	LoadTimeout time.Duration // building the model and capturing graphs (default 15m)
	WaveTime    time.Duration // bound on one wave's generate request (default 10m)
}

// SettlementSection is [settlement].
type SettlementSection struct {
	Holder   string        // settlement lease holder (default "settler-1")
	LeaseTTL time.Duration // settlement lease (default 1m)
}

// WeightsSection is [weights]: weight publication, enabled by Key.
type WeightsSection struct {
	Key        string // the validator's hotkey file; "" disables weight publication
	BurnUID    uint16 // uid of the burn target
	BurnHotkey string // hotkey the metagraph must show on BurnUID: 64 lowercase hex digits (required with Key)
	HalfLife   uint64 // blocks after which a claim keeps half its credit (default 7200)
	Interval   uint64 // finalized blocks between two publications (default 100)
	Deadline   uint64 // blocks after its projection by which a publication must show (default 50)
}

// Enabled reports whether weights are published (a key is configured).
func (w WeightsSection) Enabled() bool { return w.Key != "" }

// IntakeSection is [intake]: optional caps; zero means the intake's
// default.
type IntakeSection struct {
	PendingCap     int
	HotkeyEpochCap int
	EpochBlocks    uint64
	SLABlocks      uint64
	FetchAttempts  int
	QualifyRetries int
}

// BaseEntry is one [[base]] row: a generation-0 incumbent for a target
// under the settled stack (on a devnet, a deliberately slow kernel).
type BaseEntry struct {
	Target string // target name, unique among the rows
	Bundle string // absolute path of the bundle
}

// Postgres reports whether Data is a postgres URL rather than a directory.
func (c *Config) Postgres() bool { return isPostgres(c.Data) }

// Error is a problem in a configuration file, pointing at file:line:col
// (when known) and the key path ("referee.lease_ttl", "base[1].target"; ""
// for the file as a whole). Err is the underlying cause, if any.
type Error fielderr.Problem

// Error implements error: "validator.toml:5:1: referee.lease_ttl: message".
func (e *Error) Error() string {
	p := fielderr.Problem(*e)
	p.Err = nil // the message already says what failed
	return p.Error()
}

// Unwrap returns the underlying cause.
func (e *Error) Unwrap() error { return e.Err }

// Load reads and validates the configuration file at path; relative paths
// in it are resolved against path's directory.
func Load(path string) (*Config, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, &Error{File: path, Msg: "cannot read the configuration file: " + err.Error(), Err: err}
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxFileBytes+1))
	if err != nil {
		return nil, &Error{File: path, Msg: "read: " + err.Error(), Err: err}
	}
	dir, err := filepath.Abs(filepath.Dir(path))
	if err != nil {
		return nil, &Error{File: path, Msg: "resolve the configuration directory: " + err.Error(), Err: err}
	}
	return Parse(data, dir, path)
}

// Parse decodes and validates a configuration document. dir is the
// directory relative paths are resolved against (Load passes the file's
// absolute directory); name names the document in errors.
func Parse(data []byte, dir, name string) (*Config, error) {
	if len(data) > maxFileBytes {
		return nil, &Error{File: name, Msg: fmt.Sprintf("the file is larger than %d bytes", maxFileBytes)}
	}
	raw, err := decode(data, name)
	if err != nil {
		return nil, err
	}
	return check(raw, data, dir, name)
}
