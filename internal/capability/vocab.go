package capability

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// kind says whether a field carries an integer or a context string.
type kind uint8

const (
	numericField kind = iota + 1
	contextField
)

// vocabulary is the closed set of capability fields an arena binding can
// describe. A bundle cannot introduce a field; the validator owns this list.
func vocabulary(field string) (kind, bool) {
	switch field {
	case "num_tokens", "hidden_dim", "intermediate_dim", "head_dim", "num_heads",
		"num_kv_heads", "seq_len", "block_size", "page_size", "batch_size",
		"num_experts", "top_k", "world_size", "last_dim":
		return numericField, true
	case "dtype", "architecture", "graph_mode", "phase", "quant", "model", "device":
		return contextField, true
	}
	return 0, false
}

// VocabularyFields returns every capability field name, sorted.
func VocabularyFields() []string {
	out := []string{
		"num_tokens", "hidden_dim", "intermediate_dim", "head_dim", "num_heads",
		"num_kv_heads", "seq_len", "block_size", "page_size", "batch_size",
		"num_experts", "top_k", "world_size", "last_dim",
		"dtype", "architecture", "graph_mode", "phase", "quant", "model", "device",
	}
	sort.Strings(out)
	return out
}

// IsNumericField reports whether field is a known integer-valued field.
func IsNumericField(field string) bool {
	k, ok := vocabulary(field)
	return ok && k == numericField
}

// fieldAlias maps accepted spellings (after lowercasing and '-' → '_') to
// canonical field names.
func fieldAlias(name string) string {
	switch name {
	case "tokens", "ntokens", "num_token":
		return "num_tokens"
	case "hidden_size", "hidden":
		return "hidden_dim"
	case "intermediate_size":
		return "intermediate_dim"
	case "head_size":
		return "head_dim"
	case "heads", "num_q_heads", "num_attention_heads":
		return "num_heads"
	case "kv_heads", "num_key_value_heads":
		return "num_kv_heads"
	case "seqlen", "seq_length", "sequence_length":
		return "seq_len"
	case "batch":
		return "batch_size"
	case "experts", "n_experts", "num_local_experts":
		return "num_experts"
	case "topk":
		return "top_k"
	case "world", "worldsize":
		return "world_size"
	case "arch", "compute_capability":
		return "architecture"
	case "dtype_name", "torch_dtype":
		return "dtype"
	}
	return name
}

// NormalizeField returns the canonical name of a capability field, resolving
// aliases such as "tokens" → "num_tokens" or "arch" → "architecture". Names
// outside the closed vocabulary are an error.
func NormalizeField(name string) (string, error) {
	if name == "" {
		return "", fmt.Errorf("empty capability field name")
	}
	if len(name) > 64 {
		return "", fmt.Errorf("capability field name %q is too long", clip(name))
	}
	f := fieldAlias(strings.ReplaceAll(strings.ToLower(name), "-", "_"))
	if _, ok := vocabulary(f); !ok {
		return "", fmt.Errorf("unknown capability field %q (the vocabulary is closed: %s)",
			clip(name), strings.Join(VocabularyFields(), ", "))
	}
	return f, nil
}

// NormalizeDType returns the torch name (bfloat16, float16 or float32) for a
// dtype spelling such as "bf16", "torch.float16", "half" or "fp32".
func NormalizeDType(s string) (string, error) {
	v := strings.TrimPrefix(strings.ToLower(s), "torch.")
	switch v {
	case "bfloat16", "bf16":
		return "bfloat16", nil
	case "float16", "fp16", "f16", "half":
		return "float16", nil
	case "float32", "fp32", "f32", "float":
		return "float32", nil
	}
	return "", fmt.Errorf("unknown dtype %q (want bfloat16, float16 or float32, or bf16/fp16/fp32)", clip(s))
}

// NormalizeArchitecture returns the canonical "smNN" form of a GPU
// architecture spelling: "sm_90", "SM90", "sm-90", "9.0" and "90" all become
// "sm90"; a trailing feature suffix "a" or "f" is kept ("sm_90a" → "sm90a").
func NormalizeArchitecture(s string) (string, error) {
	bad := func() (string, error) {
		return "", fmt.Errorf("invalid architecture %q (want sm<NN> such as sm90, or 9.0, or 90)", clip(s))
	}
	v := strings.ToLower(s)
	for _, p := range []string{"sm_", "sm-", "sm"} {
		if strings.HasPrefix(v, p) {
			v = v[len(p):]
			break
		}
	}
	suffix := ""
	if n := len(v); n > 0 && (v[n-1] == 'a' || v[n-1] == 'f') {
		suffix, v = v[n-1:], v[:n-1]
	}
	if major, minor, ok := strings.Cut(v, "."); ok {
		if !allDigits(major, 1, 2) || !allDigits(minor, 1, 1) || major[0] == '0' {
			return bad()
		}
		v = major + minor
	}
	if !allDigits(v, 2, 3) || v[0] == '0' {
		return bad()
	}
	return "sm" + v + suffix, nil
}

func allDigits(s string, minLen, maxLen int) bool {
	if len(s) < minLen || len(s) > maxLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// normalizeContext returns the canonical value of a context field.
func normalizeContext(field, s string) (string, error) {
	if s == "" {
		return "", fmt.Errorf("%s: empty value", field)
	}
	if len(s) > 256 {
		return "", fmt.Errorf("%s: value %q is too long", field, clip(s))
	}
	lower := strings.ReplaceAll(strings.ToLower(s), "-", "_")
	switch field {
	case "dtype":
		return NormalizeDType(s)
	case "architecture":
		return NormalizeArchitecture(s)
	case "graph_mode":
		switch lower {
		case "eager", "graphs_off":
			return "eager", nil
		case "graph", "cuda_graph", "cudagraph", "graphs_on":
			return "graph", nil
		}
		return "", fmt.Errorf("graph_mode: invalid value %q (want eager or graph)", clip(s))
	case "phase":
		switch lower {
		case "prefill", "extend":
			return "prefill", nil
		case "decode", "mixed":
			return lower, nil
		}
		return "", fmt.Errorf("phase: invalid value %q (want prefill, decode or mixed)", clip(s))
	case "device":
		switch lower {
		case "cpu":
			return "cpu", nil
		case "cuda", "gpu":
			return "cuda", nil
		}
		return "", fmt.Errorf("device: invalid value %q (want cpu or cuda)", clip(s))
	case "quant":
		switch lower {
		case "none", "unquantized":
			return "dense", nil
		}
		if len(lower) > 64 || !isToken(lower, false) {
			return "", fmt.Errorf("quant: invalid value %q (want a lowercase name such as dense, fp8 or w4a16)", clip(s))
		}
		return lower, nil
	case "model":
		// Model identifiers are case-sensitive repository names: kept as is.
		if !isToken(s, true) {
			return "", fmt.Errorf("model: invalid value %q (letters, digits and . _ - / + only)", clip(s))
		}
		return s, nil
	}
	return "", fmt.Errorf("%s is not a context field", field)
}

// isToken reports whether s is made of [a-z0-9_] (and, for model names,
// upper-case letters and . - / +).
func isToken(s string, model bool) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '_':
		case model && (c >= 'A' && c <= 'Z' || c == '.' || c == '-' || c == '/' || c == '+'):
		default:
			return false
		}
	}
	return true
}

// NormalizeValue returns the canonical value of a context field's string,
// e.g. ("dtype", "bf16") → "bfloat16". field must be canonical.
func NormalizeValue(field, s string) (string, error) {
	k, ok := vocabulary(field)
	if !ok || k != contextField {
		return "", fmt.Errorf("%q is not a context capability field", clip(field))
	}
	return normalizeContext(field, s)
}

// parseInt parses a non-negative decimal integer literal (JSON number text).
func parseInt(field, lit string) (int64, error) {
	n, err := strconv.ParseInt(lit, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: %s is not an integer (predicates on numeric fields take integers only)", field, clip(lit))
	}
	if n < 0 {
		return 0, fmt.Errorf("%s: %d is negative", field, n)
	}
	return n, nil
}

func clip(s string) string {
	if len(s) > 80 {
		return s[:77] + "..."
	}
	return s
}
