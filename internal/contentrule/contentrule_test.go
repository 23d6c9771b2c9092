package contentrule

import "testing"

func TestExcluded(t *testing.T) {
	tests := []struct {
		path string
		want bool
	}{
		{"a.py", false}, {".git", true}, {".git/config", true}, {"x/.git/HEAD", true},
		{"__pycache__/a.pyc", true}, {"x/__pycache__/a.py", true}, {"a.pyc", true}, {"a.pyo", true},
		{"x/a.b.pyc", true}, {".pyc", false}, {".pyo", false}, {"..pyc", true}, {"a.pyc.txt", false},
		{"dir.pyc/a.py", false}, {"._a.py", true}, {"x/._a", true}, {"._dir/a.py", false},
		{".gitignore", false}, {"a.py.", false}, {"pycache/a", false},
	}
	for _, tt := range tests {
		if got := Excluded(tt.path); got != tt.want {
			t.Errorf("Excluded(%q) = %v, want %v", tt.path, got, tt.want)
		}
	}
}

func TestExcludedDir(t *testing.T) {
	tests := []struct {
		name string
		want bool
	}{
		{".git", true}, {"__pycache__", true}, {"git", false}, {".github", false},
		{"pycache", false}, {"x", false}, {"._dir", false}, {"dir.pyc", false},
	}
	for _, tt := range tests {
		if got := ExcludedDir(tt.name); got != tt.want {
			t.Errorf("ExcludedDir(%q) = %v, want %v", tt.name, got, tt.want)
		}
	}
}
