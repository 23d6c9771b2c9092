package scan

// unsupportedModules are modules that miner bundles written for the
// established tool import for features this validator does not serve, with
// the reason. An import of one is refused like any import outside the
// allow-list (rule import-not-allowed), but the message says why, so a
// miner moving over learns it is a feature difference, not a typo.
var unsupportedModules = map[string]string{
	"cutlass": "CuTe DSL (cutlass) kernels compose into validator-owned base kernels through override points, " +
		"which this validator does not serve; write the slot's entry in torch or Triton",
	"sglang": "bundle code may not reach into the serving engine (engine setup hooks and patches); " +
		"this validator runs only the slot's entry on validator-owned tensors",
}

// unsupportedImport returns the message for an import of the top-level
// module top when it is one of unsupportedModules, else "".
func unsupportedImport(abs, top string) string {
	reason, ok := unsupportedModules[top]
	if !ok {
		return ""
	}
	return "import of \"" + abs + "\" is not supported by this validator: " + reason
}
