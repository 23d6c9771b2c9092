package scan

import "testing"

// TestIsSunder: only _x_ names (one underscore each side) are sunder;
// dunders, privates and lone underscores are not.
func TestIsSunder(t *testing.T) {
	for name, want := range map[string]bool{
		"_convert_": true, "_x_": true, "_value_": true,
		"_": false, "__": false, "___": false, "__x__": false, "_x__": false, "__x_": false,
		"_private": false, "trailing_": false, "plain": false,
	} {
		if got := isSunder(name); got != want {
			t.Errorf("isSunder(%q) = %v, want %v", name, got, want)
		}
	}
}
