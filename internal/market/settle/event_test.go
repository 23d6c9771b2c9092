package settle

import (
	"errors"
	"strings"
	"testing"

	"cacheon/internal/canon"
)

// journal returns the records of a two-crown plan from an empty journal.
func journal(t testing.TB) []Record {
	g := mustDigest(t, Genesis())
	p, err := Make(fakeCatalog{}, Input{Stack: Genesis(), StackDigest: g, Candidates: []Candidate{
		cand("x", "a", g, 1_050_000, 10), cand("y", "c", g, 1_020_000, 11)}})
	if err != nil {
		t.Fatal(err)
	}
	var recs []Record
	for _, c := range p.Crowns {
		for i, ev := range c.Events {
			recs = append(recs, Record{Seq: ev.Seq, Digest: c.Digests[i], Data: c.Data[i]})
		}
	}
	return recs
}

func TestVerify(t *testing.T) {
	recs := journal(t)
	h, err := Verify(recs)
	if err != nil || h.Seq != 4 || h.Digest != recs[3].Digest {
		t.Fatalf("Verify = %+v, %v", h, err)
	}
	second, _, _ := DecodeEvent(recs[1].Data)
	second.Stack = dg("forged")
	forged, forgedDigest, _ := second.Encode()
	tests := []struct {
		name   string
		edit   func([]Record) []Record
		bad    int64
		reason string
	}{
		{"a gap", func(r []Record) []Record { return append(r[:1], r[2:]...) }, 3, "sequence number"},
		{"a changed byte", func(r []Record) []Record {
			r[2].Data = []byte(strings.Replace(string(r[2].Data), `"kind":"CROWN"`, `"kind":"CROWM"`, 1))
			return r
		}, 3, "kind"},
		{"a rewritten event", func(r []Record) []Record { r[1].Data = forged; return r }, 2, "digest"},
		{"a rewritten event with its digest", func(r []Record) []Record { r[1].Data, r[1].Digest = forged, forgedDigest; return r }, 3, "prev"},
		{"reordered", func(r []Record) []Record { r[0], r[1] = r[1], r[0]; return r }, 2, "sequence number"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cp := append([]Record(nil), journal(t)...)
			_, err := Verify(tc.edit(cp))
			var ve *VerifyError
			if !errors.As(err, &ve) || ve.Seq != tc.bad || !strings.Contains(ve.Reason, tc.reason) {
				t.Errorf("Verify = %v, want event %d: %s", err, tc.bad, tc.reason)
			}
		})
	}
}

func TestDecodeEventRefuses(t *testing.T) {
	data := journal(t)[0].Data
	for name, b := range map[string]string{
		"whitespace":   " " + string(data),
		"other domain": strings.Replace(string(data), DomainEvent, "cacheon.other", 1),
		"version":      strings.Replace(string(data), `"schema_version":1`, `"schema_version":2`, 1),
		"unknown":      strings.Replace(string(data), `"block"`, `"blocky":1,"block"`, 1),
		"float":        strings.Replace(string(data), `"speedup_ppm":1050000`, `"speedup_ppm":1.5`, 1),
		"empty":        "",
	} {
		if _, _, err := DecodeEvent([]byte(b)); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
}

func FuzzDecodeEvent(f *testing.F) {
	for _, r := range journal(f) {
		f.Add(r.Data)
	}
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		ev, d, err := DecodeEvent(data)
		if err != nil {
			return
		}
		// Whatever decodes re-encodes to the same bytes and digest.
		again, d2, err := ev.Encode()
		if err != nil || string(again) != string(data) || d2 != d {
			t.Fatalf("decoded %+v does not re-encode to its bytes (%v)", ev, err)
		}
	})
}

func FuzzDecodeStack(f *testing.F) {
	for _, st := range []Stack{Genesis(), stackAB()} {
		b, err := canon.Marshal(st)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"entries":null,"generation":0}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		st, d, err := DecodeStack(data)
		if err != nil {
			return
		}
		// Whatever decodes has the digest StackDigest gives it.
		if want, err := StackDigest(st); err != nil || want != d {
			t.Fatalf("DecodeStack digest %s, StackDigest %s (%v)", d, want, err)
		}
	})
}
