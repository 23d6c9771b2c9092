package compattest

import (
	"strings"
	"testing"
)

const sample = `# corpus

| bundle | content hash |
|---|---|
| miner_a | e17a2f17833f7b59c7f1f27684773bb5d9210296304e51ebbf1707b7355e7c68 |
| hash-edge/b | 47551cced0886abf454135addc198aa252b3a3f619714692cfdf1a6131e5bda7 |

| bundle | outcome there |
|---|---|
| miner_a | scan clean |
`

func TestParseHashTable(t *testing.T) {
	got, err := ParseHashTable(sample)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Name != "miner_a" || got[1].Name != "hash-edge/b" || !strings.HasPrefix(got[1].Hash, "47551c") {
		t.Fatalf("got %+v", got)
	}
	for _, bad := range []string{
		"no table",
		sample + "| miner_a | e17a2f17833f7b59c7f1f27684773bb5d9210296304e51ebbf1707b7355e7c68 |\n",
		"| ../x | e17a2f17833f7b59c7f1f27684773bb5d9210296304e51ebbf1707b7355e7c68 |\n",
	} {
		if _, err := ParseHashTable(bad); err == nil {
			t.Errorf("ParseHashTable(%q) succeeded", bad)
		}
	}
}

// FuzzParseHashTable: any README text yields rows with a 64-hex hash and a
// safe relative name, or an error.
func FuzzParseHashTable(f *testing.F) {
	f.Add(sample)
	f.Add("| a | b |\n")
	f.Fuzz(func(t *testing.T, s string) {
		rows, err := ParseHashTable(s)
		if err != nil {
			return
		}
		for _, r := range rows {
			if !isHash(r.Hash) || r.Name == "" || strings.Contains(r.Name, "..") || strings.HasPrefix(r.Name, "/") {
				t.Fatalf("bad row %+v", r)
			}
		}
	})
}
