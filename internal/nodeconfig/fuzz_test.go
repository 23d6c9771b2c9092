package nodeconfig

import (
	"errors"
	"reflect"
	"testing"
)

// FuzzParse: Parse never panics; it fails with an *Error, or it accepts a
// configuration whose required values are set, whose durations are
// positive, and which marshals to a document that parses back to it.
func FuzzParse(f *testing.F) {
	f.Add([]byte(Example()))
	f.Add([]byte(doc("", "")))
	f.Add([]byte(doc(`listen = "[::1]:0"`, "[weights]\nkey = \"k\"\nburn_hotkey = \""+hotkey+"\"\n[[base]]\ntarget = \"t\"\nbundle = \"b\"")))
	f.Add([]byte(`data = "postgres://db/x"` + "\nwork = \"w\"\nchain = \"https://c\"\narena = \"a.toml\"\nreferee = { calibration = \"c\", evidence = \"e\" }\n"))
	f.Add([]byte("base = [{ target = 1 }]\nDATA = 'x'\n[Referee]\n"))
	f.Add([]byte("[[base]]\n[[base]]\nkernel = 1\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse(data, "/cfg", "f.toml")
		if err != nil {
			var ce *Error
			if !errors.As(err, &ce) {
				t.Fatalf("error %T is not *Error: %v", err, err)
			}
			return
		}
		if c.Data == "" || c.Work == "" || c.Chain == "" || c.Arena == "" || c.Referee.Calibration == "" || c.Referee.Evidence == "" {
			t.Fatalf("accepted without a required value: %+v", c)
		}
		for _, d := range []any{c.Poll, c.Referee.LeaseTTL, c.Referee.LoadTimeout, c.Referee.WaveTime, c.Settlement.LeaseTTL} {
			if reflect.ValueOf(d).Int() <= 0 {
				t.Fatalf("accepted a non-positive duration: %+v", c)
			}
		}
		if c.Weights.Enabled() && !isHotkey(c.Weights.BurnHotkey) {
			t.Fatalf("weights enabled without a burn hotkey: %+v", c)
		}
		b, err := c.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		again, err := Parse(b, "/elsewhere", "marshaled.toml")
		if err != nil {
			t.Fatalf("marshaled configuration does not parse: %v\n%s", err, b)
		}
		if !reflect.DeepEqual(again, c) {
			t.Fatalf("round trip changed the configuration:\n got %+v\nwant %+v", again, c)
		}
	})
}
