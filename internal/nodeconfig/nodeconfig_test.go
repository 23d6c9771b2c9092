package nodeconfig

import (
	"errors"
	"flag"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata")

const hotkey = "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a"

// doc is a minimal valid configuration with top added to the top level and
// tail after the [referee] table.
func doc(top, tail string) string {
	return `data = "state"
chain = "http://127.0.0.1:9944"
arena = "cpu-tiny"
` + top + `
[referee]
calibration = "cal.json"
` + tail
}

func TestDefaults(t *testing.T) {
	got, err := Parse([]byte(doc("", "")), "/etc/cacheon", "v.toml")
	if err != nil {
		t.Fatal(err)
	}
	want := &Config{
		Data: "/etc/cacheon/state", Work: "/etc/cacheon/state/bundles", Chain: "http://127.0.0.1:9944", Arena: "cpu-tiny",
		LogFormat: "text", LogLevel: "info", Poll: 2 * time.Second,
		Referee: RefereeSection{Group: "local0", Holder: "referee-1", Calibration: "/etc/cacheon/cal.json",
			Evidence: "/etc/cacheon/state/evidence", LeaseTTL: 10 * time.Minute, TPrompts: 8, AuditShare: "0.25",
			MinAudited: 2, LoadTimeout: 15 * time.Minute, WaveTime: 10 * time.Minute},
		Settlement: SettlementSection{Holder: "settler-1", LeaseTTL: time.Minute},
		Weights:    WeightsSection{HalfLife: 7200, Interval: 100, Deadline: 50},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("defaults:\n got %+v\nwant %+v", got, want)
	}
	if got.Postgres() || got.Weights.Enabled() {
		t.Fatal("a directory store without a key is neither postgres nor publishing weights")
	}
}

func TestGood(t *testing.T) {
	tests := []struct {
		name  string
		doc   string
		check func(c *Config) bool
	}{
		{"postgres store keeps its URL; work and evidence are required and resolved",
			`data = "postgres://u:p@db:5432/cacheon?sslmode=disable"
work = "bundles"
chain = "https://chain.example:443/rpc"
arena = "arenas/h200.toml"
[referee]
calibration = "/abs/cal.json"
evidence = "../evidence"`,
			func(c *Config) bool {
				return c.Postgres() && c.Data == "postgres://u:p@db:5432/cacheon?sslmode=disable" && c.Work == "/etc/cacheon/bundles" &&
					c.Chain == "https://chain.example:443/rpc" && c.Arena == "/etc/cacheon/arenas/h200.toml" &&
					c.Referee.Calibration == "/abs/cal.json" && c.Referee.Evidence == "/etc/evidence"
			}},
		{"postgresql scheme", strings.Replace(doc(`work = "w"`, `evidence = "e"`), `"state"`, `"postgresql://db/x"`, 1),
			func(c *Config) bool { return c.Postgres() && c.Work == "/etc/cacheon/w" }},
		{"an arena file without a slash but with .toml", strings.Replace(doc("", ""), `"cpu-tiny"`, `"mine.toml"`, 1),
			func(c *Config) bool { return c.Arena == "/etc/cacheon/mine.toml" }},
		{"python: a command name stays, a path resolves", doc(`python = "python3.12"`, ""),
			func(c *Config) bool { return c.Python == "python3.12" }},
		{"python path", doc(`python = "venv/bin/python"`, ""),
			func(c *Config) bool { return c.Python == "/etc/cacheon/venv/bin/python" }},
		{"every top-level key", doc(`allow_loopback_http = true
listen = ":9464"
log_format = "json"
log_level = "debug"
poll = "1.5s"`, ""),
			func(c *Config) bool {
				return c.AllowLoopbackHTTP && c.Listen == ":9464" && c.LogFormat == "json" && c.LogLevel == "debug" && c.Poll == 1500*time.Millisecond
			}},
		{"listen on IPv6 port 0", doc(`listen = "[::1]:0"`, ""), func(c *Config) bool { return c.Listen == "[::1]:0" }},
		{"empty strings take the defaults", doc(`work = ""
python = ""
log_format = ""
poll = ""`, `group = ""
lease_ttl = ""
audit_share = ""`),
			func(c *Config) bool {
				return c.Work == "/etc/cacheon/state/bundles" && c.LogFormat == "text" && c.Poll == DefaultPoll &&
					c.Referee.Group == "local0" && c.Referee.LeaseTTL == DefaultRefereeLeaseTTL && c.Referee.AuditShare == "0.25"
			}},
		{"referee knobs", doc("", `group = "h200-a"
holder = "ref-2"
lease_ttl = "1h30m"
waves = 5
warmup = 0
t_prompts = 2
audit_share = "5e-1"
min_audited = 0
load_timeout = "30m"
wave_time = "90s"`),
			func(c *Config) bool {
				r := c.Referee
				return r.Group == "h200-a" && r.Holder == "ref-2" && r.LeaseTTL == 90*time.Minute && r.Waves == 5 && r.Warmup == 0 &&
					r.TPrompts == 2 && r.AuditShare == "0.5" && r.MinAudited == 0 && r.LoadTimeout == 30*time.Minute && r.WaveTime == 90*time.Second
			}},
		{"weights enabled", doc("", `[weights]
key = "keys/validator.key"
burn_uid = 65535
burn_hotkey = "`+hotkey+`"
half_life = 1
interval = 2
deadline = 3`),
			func(c *Config) bool {
				w := c.Weights
				return w.Enabled() && w.Key == "/etc/cacheon/keys/validator.key" && w.BurnUID == 65535 && w.BurnHotkey == hotkey &&
					w.HalfLife == 1 && w.Interval == 2 && w.Deadline == 3
			}},
		{"settlement and intake", doc("", `[settlement]
holder = "s-9"
lease_ttl = "30s"
[intake]
pending_cap = 8
hotkey_epoch_cap = 1
epoch_blocks = 10
sla_blocks = 20
fetch_attempts = 5
qualify_retries = 0`),
			func(c *Config) bool {
				return c.Settlement == SettlementSection{Holder: "s-9", LeaseTTL: 30 * time.Second} &&
					c.Intake == IntakeSection{PendingCap: 8, HotkeyEpochCap: 1, EpochBlocks: 10, SLABlocks: 20, FetchAttempts: 5}
			}},
		{"base rows", doc("", `[[base]]
target = "activation.silu_and_mul"
bundle = "bases/silu"
[[base]]
target = "norm.rmsnorm"
bundle = "/srv/bases/rms"`),
			func(c *Config) bool {
				return reflect.DeepEqual(c.Base, []BaseEntry{{"activation.silu_and_mul", "/etc/cacheon/bases/silu"}, {"norm.rmsnorm", "/srv/bases/rms"}})
			}},
		{"inline tables and dotted keys", `data = "/var/lib/cacheon"
chain = "http://localhost:9944"
arena = "cpu-tiny"
referee = { calibration = "c.json", waves = 3 }
weights.half_life = 10
base = [{ target = "t", bundle = "b" }]`,
			func(c *Config) bool {
				return c.Data == "/var/lib/cacheon" && c.Referee.Waves == 3 && c.Weights.HalfLife == 10 &&
					reflect.DeepEqual(c.Base, []BaseEntry{{"t", "/etc/cacheon/b"}})
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse([]byte(tt.doc), "/etc/cacheon", "v.toml")
			if err != nil {
				t.Fatal(err)
			}
			if !tt.check(c) {
				t.Fatalf("unexpected configuration: %+v", c)
			}
			roundTrip(t, c)
		})
	}
}

// roundTrip checks that c marshals to a document that parses, from another
// directory, to c.
func roundTrip(t *testing.T, c *Config) {
	t.Helper()
	b, err := c.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	again, err := Parse(b, "/elsewhere", "marshaled.toml")
	if err != nil {
		t.Fatalf("marshaled configuration does not parse: %v\n%s", err, b)
	}
	if !reflect.DeepEqual(again, c) {
		t.Fatalf("round trip changed the configuration:\n got %+v\nwant %+v\n%s", again, c, b)
	}
}

func TestBad(t *testing.T) {
	tests := []struct {
		name, doc string
		want      string // regexp on the error
	}{
		{"syntax", doc("data = = 1", ""), `^v\.toml:4:\d+: `},
		{"unknown key", doc(`colour = "blue"`, ""), `^v\.toml:4:1: colour: unknown key`},
		{"unknown key in a table", doc("", "colour = 1"), `^v\.toml:7:1: referee\.colour: unknown key`},
		{"unknown table", doc("", "[metrics]\nlisten = 1"), `^v\.toml:7:2: metrics: unknown key`},
		{"key in another case", doc(`Listen = ":1"`, ""), `^v\.toml:4:1: Listen: unknown key \(keys are lowercase: listen\)`},
		{"table in another case", strings.Replace(doc("", ""), "[referee]", "[Referee]", 1), `^v\.toml:5:2: Referee: unknown key \(keys are lowercase: referee\)`},
		{"unknown key in a base row", doc("", "[[base]]\ntarget = \"t\"\nbundle = \"b\"\n[[base]]\nkernel = \"k\""), `^v\.toml:11:1: base\[1\]\.kernel: unknown key`},
		{"unknown key in an inline table", doc(`intake = { pending = 1 }`, ""), `^v\.toml:4:12: intake\.pending: unknown key`},
		{"string for a bool", doc(`allow_loopback_http = "yes"`, ""), `^v\.toml:4:23: allow_loopback_http: wrong type: got a TOML string, want a boolean`},
		{"integer for a string", doc("", "group = 7"), `referee\.group: wrong type: got a TOML integer, want a string`},
		{"integer for a duration", doc("", "lease_ttl = 600"), `referee\.lease_ttl: wrong type: got a TOML integer, want a duration string`},
		{"float for a decimal", doc("", "audit_share = 0.5"), `referee\.audit_share: wrong type: got a TOML float, want a decimal string`},
		{"string for an integer", doc("", `waves = "3"`), `referee\.waves: wrong type: got a TOML string, want an integer`},
		{"wrong type in a base row", doc("", "[[base]]\ntarget = 1"), `^v\.toml:8:10: base\[0\]\.target: wrong type: got a TOML integer, want a string`},
		{"wrong type in an inline table", doc(`settlement = { lease_ttl = 60 }`, ""), `^v\.toml:4:28: settlement\.lease_ttl: wrong type`},
		{"scalar for a table", doc(`weights = 1`, ""), `weights: wrong type: got a TOML integer, want a table`},
		{"missing data", strings.Replace(doc("", ""), `data = "state"`, "", 1), `^v\.toml: data: missing \(required: a directory or a postgres:// URL\)`},
		{"empty data", strings.Replace(doc("", ""), `data = "state"`, `data = ""`, 1), `^v\.toml:1:1: data: empty \(required`},
		{"data with another scheme", strings.Replace(doc("", ""), `"state"`, `"mysql://db/x"`, 1), `data: "mysql://db/x" is neither a directory nor a postgres:// URL`},
		{"data with a NUL", strings.Replace(doc("", ""), `"state"`, `"st\u0000ate"`, 1), `data: "st\\x00ate" contains a NUL byte`},
		{"data with a tilde", strings.Replace(doc("", ""), `"state"`, `"~/state"`, 1), `data: "~/state": ~ is not expanded`},
		{"postgres without work", strings.Replace(doc("", `evidence = "e"`), `"state"`, `"postgres://db/x"`, 1), `^v\.toml: work: missing \(required: a directory, as data is a postgres:// URL\)`},
		{"postgres without evidence", strings.Replace(doc(`work = "w"`, ""), `"state"`, `"postgres://db/x"`, 1), `^v\.toml:5:2: referee\.evidence: missing \(required: a directory, as data is a postgres`},
		{"missing chain", strings.Replace(doc("", ""), `chain = "http://127.0.0.1:9944"`, "", 1), `^v\.toml: chain: missing \(required`},
		{"chain scheme", strings.Replace(doc("", ""), `http://127`, `ws://127`, 1), `^v\.toml:2:1: chain: "ws://127\.0\.0\.1:9944" is not an http:// or https:// URL with a host`},
		{"chain without host", strings.Replace(doc("", ""), `"http://127.0.0.1:9944"`, `"http:///x"`, 1), `chain: "http:///x" is not an http`},
		{"chain not a URL", strings.Replace(doc("", ""), `"http://127.0.0.1:9944"`, `"127.0.0.1:9944"`, 1), `chain: "127\.0\.0\.1:9944" is not an http`},
		{"chain fragment", strings.Replace(doc("", ""), `9944"`, `9944/#x"`, 1), `chain: "http://127\.0\.0\.1:9944/#x": a chain URL has no fragment`},
		{"missing arena", strings.Replace(doc("", ""), `arena = "cpu-tiny"`, "", 1), `^v\.toml: arena: missing \(required`},
		{"arena not a name", strings.Replace(doc("", ""), `"cpu-tiny"`, `"CPU Tiny"`, 1), `arena: "CPU Tiny" is neither a shipped arena's name nor a path \(write \./CPU Tiny`},
		{"python with a space", doc(`python = "python 3"`, ""), `python: "python 3" is neither a command name nor a path`},
		{"listen without a port", doc(`listen = "localhost"`, ""), `^v\.toml:4:1: listen: "localhost" is not a host:port address`},
		{"listen port out of range", doc(`listen = "127.0.0.1:65536"`, ""), `listen: "127\.0\.0\.1:65536": port "65536" is not a number in \[0, 65535\]`},
		{"listen named port", doc(`listen = ":http"`, ""), `listen: ":http": port "http" is not a number`},
		{"log format", doc(`log_format = "xml"`, ""), `log_format: "xml": want text or json`},
		{"log level", doc(`log_level = "trace"`, ""), `log_level: "trace": want debug, info, warn or error`},
		{"poll not a duration", doc(`poll = "2"`, ""), `^v\.toml:4:1: poll: "2" is not a positive duration`},
		{"poll zero", doc(`poll = "0s"`, ""), `poll: "0s" is not a positive duration`},
		{"negative lease", doc("", `lease_ttl = "-1s"`), `^v\.toml:7:1: referee\.lease_ttl: "-1s" is not a positive duration`},
		{"missing calibration", strings.Replace(doc("", ""), `calibration = "cal.json"`, "", 1), `^v\.toml:5:2: referee\.calibration: missing \(required: the arena's calibration record`},
		{"missing referee", `data = "d"` + "\nchain = \"http://c\"\narena = \"a\"\n", `^v\.toml: referee\.calibration: missing`},
		{"group with a space", doc("", `group = "a b"`), `referee\.group: "a b" is not a name`},
		{"waves range", doc("", "waves = 1001"), `referee\.waves: 1001 is not in \[0, 1000\]`},
		{"warmup negative", doc("", "warmup = -1"), `referee\.warmup: -1 is not in \[0, 100\]`},
		{"t_prompts", doc("", "t_prompts = 1"), `referee\.t_prompts: 1 is not in \[2, 65536\]`},
		{"audit share not a decimal", doc("", `audit_share = "half"`), `referee\.audit_share: "half" is not a decimal in \[0, 1\]`},
		{"audit share above 1", doc("", `audit_share = "1.01"`), `referee\.audit_share: "1\.01" is not a decimal in \[0, 1\]`},
		{"audit share negative", doc("", `audit_share = "-0.1"`), `referee\.audit_share: "-0\.1" is not a decimal`},
		{"wave time", doc("", `wave_time = "forever"`), `referee\.wave_time: "forever" is not a positive duration`},
		{"settlement lease", doc("", "[settlement]\nlease_ttl = \"-5m\""), `^v\.toml:8:1: settlement\.lease_ttl: "-5m" is not a positive duration`},
		{"key without burn hotkey", doc("", "[weights]\nkey = \"k\""), `^v\.toml:7:2: weights\.burn_hotkey: missing \(required: with weights\.key`},
		{"burn hotkey not hex", doc("", "[weights]\nkey = \"k\"\nburn_hotkey = \""+strings.ToUpper(hotkey)+"\""), `^v\.toml:9:1: weights\.burn_hotkey: "D75A.*" is not a hotkey \(64 lowercase hex digits\)`},
		{"burn hotkey short", doc("", "[weights]\nkey = \"k\"\nburn_hotkey = \"abc\""), `weights\.burn_hotkey: "abc" is not a hotkey`},
		{"burn hotkey without key", doc("", "[weights]\nburn_hotkey = \""+hotkey+"\""), `weights\.burn_hotkey: set without weights\.key`},
		{"burn uid negative", doc("", "[weights]\nburn_uid = -1"), `weights\.burn_uid: -1 is not in \[0, 65535\]`},
		{"burn uid too big", doc("", "[weights]\nburn_uid = 65536"), `weights\.burn_uid: 65536 is not in \[0, 65535\]`},
		{"half life zero", doc("", "[weights]\nhalf_life = 0"), `^v\.toml:8:1: weights\.half_life: 0 is less than 1$`},
		{"interval zero", doc("", "[weights]\ninterval = 0"), `weights\.interval: 0 is less than 1$`},
		{"deadline negative", doc("", "[weights]\ndeadline = -50"), `weights\.deadline: -50 is less than 1$`},
		{"intake negative", doc("", "[intake]\npending_cap = -1"), `^v\.toml:8:1: intake\.pending_cap: -1 is not in \[0, `},
		{"intake sla negative", doc("", "[intake]\nsla_blocks = -1"), `intake\.sla_blocks: -1 is less than 0$`},
		{"intake lease", doc("", "[intake]\nlease_ttl = \"1m\""), `intake\.lease_ttl: unknown key`},
		{"base without target", doc("", "[[base]]\nbundle = \"b\""), `^v\.toml:7:3: base\[0\]\.target: missing \(required`},
		{"base empty target", doc("", "[[base]]\ntarget = \"\"\nbundle = \"b\""), `^v\.toml:8:1: base\[0\]\.target: empty \(required`},
		{"base without bundle", doc("", "[[base]]\ntarget = \"t\""), `base\[0\]\.bundle: missing \(required: the incumbent's bundle directory\)`},
		{"base duplicate target", doc("", "[[base]]\ntarget = \"t\"\nbundle = \"a\"\n[[base]]\ntarget = \"t\"\nbundle = \"b\""),
			`^v\.toml:11:1: base\[1\]\.target: "t" is also the target of base\[0\]`},
		{"base target with a space", doc("", "[[base]]\ntarget = \"a b\"\nbundle = \"b\""), `base\[0\]\.target: "a b" is not a target name`},
		{"base as a table", doc("", "[base]\ntarget = \"t\""), `^v\.toml:7:2: base: an array of tables: write \[\[base\]\] rows`},
		{"base as an inline table", doc(`base = { target = "t" }`, ""), `^v\.toml:4:8: base: an array of tables`},
		{"referee as an array of tables", strings.Replace(doc("", ""), "[referee]", "[[referee]]", 1), `^v\.toml:5:3: referee: a table: write \[referee\], not \[\[referee\]\]`},
		{"a base row's key as a table", doc("", "[[base]]\n[base.target]"), `^v\.toml:8:2: base\.target: wrong type: got a table, want a string$`},
		{"duplicate key", doc(`data = "again"`, ""), `^v\.toml:4:1: `},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.doc), "/etc/cacheon", "v.toml")
			if err == nil {
				t.Fatal("accepted")
			}
			var ce *Error
			if !errors.As(err, &ce) {
				t.Fatalf("error %T is not *Error: %v", err, err)
			}
			if !regexp.MustCompile(tt.want).MatchString(err.Error()) {
				t.Fatalf("error %q does not match %q", err, tt.want)
			}
		})
	}
}

// TestLoadRelativePaths: Load resolves relative paths against the file's
// directory, whatever the working directory, and leaves URLs and names.
func TestLoadRelativePaths(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "etc", "cacheon")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	body := `data = "state"
chain = "http://127.0.0.1:9944/"
arena = "./arenas/mine"
python = "../venv/bin/python"
[referee]
calibration = "cal/c.json"
[weights]
key = "hotkey.key"
burn_hotkey = "` + hotkey + `"
[[base]]
target = "t"
bundle = "bases/t"
`
	path := filepath.Join(dir, "validator.toml")
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Chdir(root) // the working directory is not the file's
	for _, p := range []string{path, filepath.Join("etc", "cacheon", "validator.toml")} {
		c, err := Load(p)
		if err != nil {
			t.Fatal(err)
		}
		got := []string{c.Data, c.Work, c.Arena, c.Python, c.Referee.Calibration, c.Referee.Evidence, c.Weights.Key, c.Base[0].Bundle, c.Chain}
		want := []string{dir + "/state", dir + "/state/bundles", dir + "/arenas/mine", root + "/etc/venv/bin/python", dir + "/cal/c.json",
			dir + "/state/evidence", dir + "/hotkey.key", dir + "/bases/t", "http://127.0.0.1:9944/"}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("Load(%s) paths:\n got %q\nwant %q", p, got, want)
		}
	}
}

func TestLoadErrors(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "none.toml")
	_, err := Load(missing)
	var ce *Error
	if !errors.As(err, &ce) || !errors.Is(err, fs.ErrNotExist) || !strings.HasPrefix(err.Error(), missing+": cannot read the configuration file: ") {
		t.Fatalf("Load(missing) = %v", err)
	}
	big := filepath.Join(dir, "big.toml")
	if err := os.WriteFile(big, make([]byte, maxFileBytes+1), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(big); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Fatalf("Load(big) = %v", err)
	}
	bad := filepath.Join(dir, "bad.toml")
	if err := os.WriteFile(bad, []byte(doc("", `lease_ttl = "-1s"`)), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(bad); err == nil || err.Error() != bad+`:7:1: referee.lease_ttl: "-1s" is not a positive duration (write it like "2s", "10m" or "1h30m")` {
		t.Fatalf("Load(bad) = %v", err)
	}
}

// TestExample: testdata/example.toml is Example() (go test -update rewrites
// it), it parses, round-trips, and shows every key of the schema.
func TestExample(t *testing.T) {
	golden := filepath.Join("testdata", "example.toml")
	if *update {
		if err := os.WriteFile(golden, []byte(Example()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if Example() != string(want) {
		t.Fatalf("%s differs from Example() (go test ./internal/nodeconfig -update if on purpose)", golden)
	}
	c, err := Load(golden)
	if err != nil {
		t.Fatal(err)
	}
	abs, _ := filepath.Abs("testdata")
	if c.Data != filepath.Join(abs, "state") || c.Arena != "cpu-tiny" || c.Listen != "127.0.0.1:9464" {
		t.Fatalf("example: %+v", c)
	}
	roundTrip(t, c)
	for key, typ := range schemaOf(reflect.TypeFor[rawConfig]()) {
		table, leaf, nested := strings.Cut(key, ".")
		if !nested {
			leaf = table
		}
		re := `(?m)^(# )?` + regexp.QuoteMeta(leaf) + ` = `
		switch {
		case typ.Kind() == reflect.Struct:
			re = `(?m)^\[` + key + `\]$`
		case typ.Kind() == reflect.Slice:
			re = `(?m)^(# )?\[\[` + key + `\]\]$`
		}
		if !regexp.MustCompile(re).MatchString(Example()) {
			t.Errorf("the example does not show %s", key)
		}
	}
}
