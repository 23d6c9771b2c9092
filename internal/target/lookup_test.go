package target

import (
	"slices"
	"testing"
)

// TestTargetSpecAndDisplaces: the plain-value queries the product side
// uses agree with the targets Lookup returns.
func TestTargetSpecAndDisplaces(t *testing.T) {
	c := newTestCatalog(t)
	tests := []struct {
		name          string
		registered    bool
		wantDisplaces []string
	}{
		{"norm.rmsnorm", true, nil},
		{MoEEpilogue, true, []string{"collective.ar_residual_rmsnorm", "collective.moe_finalize_ar_rmsnorm"}},
		{"attention.fast", false, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec, ok := c.TargetSpec(tt.name)
			if ok != tt.registered {
				t.Fatalf("TargetSpec ok = %v, want %v", ok, tt.registered)
			}
			if tg, _ := c.Lookup(tt.name); ok && spec != tg.SpecDigest() {
				t.Fatalf("TargetSpec = %s, Lookup's SpecDigest = %s", spec, tg.SpecDigest())
			}
			if !ok && spec != "" {
				t.Fatalf("TargetSpec of an unregistered target = %q", spec)
			}
			got := c.Displaces(tt.name)
			if !slices.Equal(got, tt.wantDisplaces) {
				t.Fatalf("Displaces = %v, want %v", got, tt.wantDisplaces)
			}
			if len(got) > 0 {
				got[0] = "changed"
				if c.Displaces(tt.name)[0] == "changed" {
					t.Fatal("Displaces returns the catalog's own slice")
				}
			}
		})
	}
}
