package nodeconfig

import (
	"fmt"
	"math"
	"net"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"cacheon/internal/canon"
	"cacheon/internal/tomlpos"
)

// checker validates the decoded configuration, keeping the first error.
type checker struct {
	file, dir string
	ix        *tomlpos.Index
	err       error
}

func (c *checker) fail(key, format string, args ...any) {
	if c.err != nil {
		return
	}
	p, _ := c.ix.Key(key)
	c.err = &Error{File: c.file, Line: p.Line, Col: p.Col, Path: key, Msg: fmt.Sprintf(format, args...)}
}

// check validates raw, applies the defaults and resolves the paths.
func check(raw *rawConfig, data []byte, dir, file string) (*Config, error) {
	c := &checker{file: file, dir: dir, ix: tomlpos.New(data)}
	cfg := c.config(raw)
	if c.err != nil {
		return nil, c.err
	}
	return cfg, nil
}

func (c *checker) config(r *rawConfig) *Config {
	cfg := &Config{}
	switch {
	case r.Data == "":
		c.required("data", "a directory or a postgres:// URL")
	case isPostgres(r.Data):
		cfg.Data = r.Data
	case strings.Contains(r.Data, "://"):
		c.fail("data", "%q is neither a directory nor a postgres:// URL", r.Data)
	default:
		cfg.Data = c.path("data", r.Data)
	}
	cfg.Work = c.dataDir("work", r.Work, cfg.Data, "bundles")
	cfg.Chain = c.chain("chain", r.Chain)
	cfg.Arena = c.arena("arena", r.Arena)
	cfg.Python = c.python("python", r.Python)
	cfg.AllowLoopbackHTTP = r.AllowLoopbackHTTP
	cfg.Listen = c.listen("listen", r.Listen)
	cfg.LogFormat = c.oneOf("log_format", r.LogFormat, DefaultLogFormat, "text", "json")
	cfg.LogLevel = c.oneOf("log_level", r.LogLevel, DefaultLogLevel, "debug", "info", "warn", "error")
	cfg.Poll = c.duration("poll", r.Poll, DefaultPoll)
	cfg.Referee = c.referee(&r.Referee, cfg.Data)
	cfg.Settlement = SettlementSection{
		Holder:   c.name("settlement.holder", r.Settlement.Holder, DefaultSettlementHolder),
		LeaseTTL: c.duration("settlement.lease_ttl", r.Settlement.LeaseTTL, DefaultSettlementLeaseTTL),
	}
	cfg.Weights = c.weights(&r.Weights)
	cfg.Intake = IntakeSection{
		PendingCap:     int(c.intIn("intake.pending_cap", r.Intake.PendingCap, 0, 0, 1<<20)),
		HotkeyEpochCap: int(c.intIn("intake.hotkey_epoch_cap", r.Intake.HotkeyEpochCap, 0, 0, 1<<20)),
		EpochBlocks:    uint64(c.intIn("intake.epoch_blocks", r.Intake.EpochBlocks, 0, 0, math.MaxInt64)),
		SLABlocks:      uint64(c.intIn("intake.sla_blocks", r.Intake.SLABlocks, 0, 0, math.MaxInt64)),
		FetchAttempts:  int(c.intIn("intake.fetch_attempts", r.Intake.FetchAttempts, 0, 0, 1<<20)),
		QualifyRetries: int(c.intIn("intake.qualify_retries", r.Intake.QualifyRetries, 0, 0, 1<<20)),
	}
	cfg.Base = c.base(r.Base)
	return cfg
}

func (c *checker) referee(r *rawReferee, data string) RefereeSection {
	s := RefereeSection{
		Group:       c.name("referee.group", r.Group, DefaultRefereeGroup),
		Holder:      c.name("referee.holder", r.Holder, DefaultRefereeHolder),
		Calibration: c.path("referee.calibration", r.Calibration),
		Evidence:    c.dataDir("referee.evidence", r.Evidence, data, "evidence"),
		LeaseTTL:    c.duration("referee.lease_ttl", r.LeaseTTL, DefaultRefereeLeaseTTL),
		Waves:       int(c.intIn("referee.waves", r.Waves, 0, 0, 1000)),
		Warmup:      int(c.intIn("referee.warmup", r.Warmup, 0, 0, 100)),
		TPrompts:    int(c.intIn("referee.t_prompts", r.TPrompts, DefaultTPrompts, 2, 1<<16)),
		MinAudited:  int(c.intIn("referee.min_audited", r.MinAudited, DefaultMinAudited, 0, 1<<16)),
		LoadTimeout: c.duration("referee.load_timeout", r.LoadTimeout, DefaultLoadTimeout),
		WaveTime:    c.duration("referee.wave_time", r.WaveTime, DefaultWaveTime),
		AuditShare:  DefaultAuditShare,
	}
	if r.Calibration == "" {
		c.required("referee.calibration", "the arena's calibration record, written by cacheon calibrate -o FILE")
	}
	if r.AuditShare != "" {
		d, err := canon.ParseDecimal(r.AuditShare)
		f, _ := d.Float64()
		if err != nil || f < 0 || f > 1 {
			c.fail("referee.audit_share", "%q is not a decimal in [0, 1]", r.AuditShare)
		}
		s.AuditShare = string(d)
	}
	return s
}

func (c *checker) weights(r *rawWeights) WeightsSection {
	w := WeightsSection{
		Key:        c.path("weights.key", r.Key),
		BurnUID:    uint16(c.intIn("weights.burn_uid", r.BurnUID, 0, 0, math.MaxUint16)),
		BurnHotkey: r.BurnHotkey,
		HalfLife:   uint64(c.intIn("weights.half_life", r.HalfLife, DefaultHalfLife, 1, math.MaxInt64)),
		Interval:   uint64(c.intIn("weights.interval", r.Interval, DefaultInterval, 1, math.MaxInt64)),
		Deadline:   uint64(c.intIn("weights.deadline", r.Deadline, DefaultDeadline, 1, math.MaxInt64)),
	}
	switch {
	case r.BurnHotkey != "" && !isHotkey(r.BurnHotkey):
		c.fail("weights.burn_hotkey", "%q is not a hotkey (64 lowercase hex digits)", r.BurnHotkey)
	case r.Key != "" && r.BurnHotkey == "":
		c.required("weights.burn_hotkey", "with weights.key: who gets the weight when no claim has credit")
	case r.Key == "" && r.BurnHotkey != "":
		c.fail("weights.burn_hotkey", "set without weights.key (weights are published only with the validator's hotkey file)")
	}
	return w
}

func (c *checker) base(rows []rawBase) []BaseEntry {
	var out []BaseEntry
	seen := map[string]int{}
	for i, r := range rows {
		at := fmt.Sprintf("base[%d]", i)
		switch j, dup := seen[r.Target]; {
		case r.Target == "":
			c.required(at+".target", "the target this bundle is the incumbent of")
		case dup:
			c.fail(at+".target", "%q is also the target of base[%d] (one incumbent per target)", r.Target, j)
		case strings.ContainsFunc(r.Target, isSpaceOrControl):
			c.fail(at+".target", "%q is not a target name", r.Target)
		}
		seen[r.Target] = i
		if r.Bundle == "" {
			c.required(at+".bundle", "the incumbent's bundle directory")
		}
		out = append(out, BaseEntry{Target: r.Target, Bundle: c.path(at+".bundle", r.Bundle)})
	}
	return out
}

// required fails: key is missing or empty.
func (c *checker) required(key, what string) {
	if c.ix.HasKey(key) {
		c.fail(key, "empty (required: %s)", what)
	} else {
		c.fail(key, "missing (required: %s)", what)
	}
}

// path resolves a file or directory path against the configuration's
// directory; "" stays "".
func (c *checker) path(key, v string) string {
	switch {
	case v == "":
		return ""
	case strings.ContainsRune(v, 0):
		c.fail(key, "%q contains a NUL byte", v)
		return ""
	case strings.HasPrefix(v, "~"):
		c.fail(key, "%q: ~ is not expanded; write the path in full or relative to the configuration file", v)
		return ""
	case filepath.IsAbs(v):
		return filepath.Clean(v)
	}
	return filepath.Join(c.dir, v)
}

// dataDir is a directory that defaults to DATA/sub, and is required when
// data is a postgres URL.
func (c *checker) dataDir(key, v, data, sub string) string {
	switch {
	case v != "":
		return c.path(key, v)
	case isPostgres(data):
		c.required(key, "a directory, as data is a postgres:// URL")
		return ""
	case data == "":
		return ""
	}
	return filepath.Join(data, sub)
}

// arena: a bare name is a shipped arena's; anything with a "/" or a .toml
// suffix is a file.
func (c *checker) arena(key, v string) string {
	switch {
	case v == "":
		c.required(key, "a shipped arena's name or an arena file")
		return ""
	case strings.ContainsRune(v, '/') || strings.HasSuffix(v, ".toml") || filepath.IsAbs(v):
		return c.path(key, v)
	case !isArenaName(v):
		c.fail(key, "%q is neither a shipped arena's name nor a path (write ./%s for a file in this directory)", v, v)
	}
	return v
}

// python: a bare command name is looked up in PATH; a path is resolved.
func (c *checker) python(key, v string) string {
	if strings.ContainsRune(v, '/') || filepath.IsAbs(v) {
		return c.path(key, v)
	}
	if strings.ContainsFunc(v, isSpaceOrControl) {
		c.fail(key, "%q is neither a command name nor a path", v)
	}
	return v
}

func (c *checker) chain(key, v string) string {
	if v == "" {
		c.required(key, "the chain node's http:// or https:// URL")
		return ""
	}
	u, err := url.Parse(v)
	switch {
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Opaque != "":
		c.fail(key, "%q is not an http:// or https:// URL with a host", v)
	case u.Fragment != "" || strings.ContainsFunc(v, isSpaceOrControl):
		c.fail(key, "%q: a chain URL has no fragment, spaces or control characters", v)
	}
	return v
}

func (c *checker) listen(key, v string) string {
	if v == "" {
		return ""
	}
	host, port, err := net.SplitHostPort(v)
	if err != nil {
		c.fail(key, "%q is not a host:port address such as \"127.0.0.1:9464\"", v)
		return v
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 || port != strconv.Itoa(n) {
		c.fail(key, "%q: port %q is not a number in [0, 65535]", v, port)
	}
	if strings.ContainsFunc(host, isSpaceOrControl) {
		c.fail(key, "%q: host %q is not a host name or address", v, host)
	}
	return v
}

// oneOf is v when it is one of allowed, def when v is "".
func (c *checker) oneOf(key, v, def string, allowed ...string) string {
	if v == "" {
		return def
	}
	for _, a := range allowed {
		if v == a {
			return v
		}
	}
	c.fail(key, "%q: want %s or %s", v, strings.Join(allowed[:len(allowed)-1], ", "), allowed[len(allowed)-1])
	return v
}

// name is a holder or group name: def when "", else no spaces or control
// characters.
func (c *checker) name(key, v, def string) string {
	if v == "" {
		return def
	}
	if strings.ContainsFunc(v, isSpaceOrControl) || len(v) > 128 {
		c.fail(key, "%q is not a name (no spaces or control characters, at most 128 bytes)", v)
	}
	return v
}

// duration parses a positive Go duration; def when "".
func (c *checker) duration(key, v string, def time.Duration) time.Duration {
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		c.fail(key, "%q is not a positive duration (write it like \"2s\", \"10m\" or \"1h30m\")", v)
	}
	return d
}

// intIn checks lo <= v <= hi when key is written; def when it is not.
func (c *checker) intIn(key string, v, def, lo, hi int64) int64 {
	if !c.ix.HasKey(key) {
		return def
	}
	switch {
	case (v < lo || v > hi) && hi == math.MaxInt64:
		c.fail(key, "%d is less than %d", v, lo)
	case v < lo || v > hi:
		c.fail(key, "%d is not in [%d, %d]", v, lo, hi)
	}
	return v
}

func isPostgres(s string) bool {
	return strings.HasPrefix(s, "postgres://") || strings.HasPrefix(s, "postgresql://")
}

// isArenaName: [a-z0-9][a-z0-9._-]{0,63}, as arena names are.
func isArenaName(s string) bool {
	if len(s) == 0 || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || i > 0 && (c == '.' || c == '_' || c == '-')) {
			return false
		}
	}
	return true
}

func isHotkey(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

func isSpaceOrControl(r rune) bool { return r <= ' ' || r == 0x7f || r == 0xfffd }
