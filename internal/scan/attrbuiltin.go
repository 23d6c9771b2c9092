package scan

import (
	"fmt"
	"strconv"
	"strings"
)

// attrBuiltinCall applies dynamic-attribute, global-mutation and the
// dotted-name rules to getattr/setattr/delattr/hasattr calls.
func (fc *fileCheck) attrBuiltinCall(c callFact) {
	switch {
	case !c.NameLiteral:
		fc.add(c.Line, c.Col, RuleDynamicAttribute,
			"%s() with a computed attribute name hides what is accessed; write obj.attr, or keep a dict of your own objects", c.Func)
	case isDunder(c.NameArg) && c.Func != "hasattr":
		fc.add(c.Line, c.Col, RuleDynamicAttribute,
			"%s() with dunder name %q reaches interpreter internals; remove it", c.Func, c.NameArg)
	case introspective(c.NameArg) && c.Func != "hasattr":
		fc.add(c.Line, c.Col, RuleIntrospection,
			"%s() with name %q reaches %s; remove it", c.Func, c.NameArg, introspectionWhat(c.NameArg))
	case clockNames[c.NameArg] != "" && c.Func != "hasattr":
		fc.add(c.Line, c.Col, RuleClock,
			"%s() with name %q reads %s, which tells verify's calls from served ones; remove it", c.Func, c.NameArg, clockNames[c.NameArg])
	case deviceCodeNames[c.NameArg] && c.Func != "hasattr":
		fc.add(c.Line, c.Col, RuleClock,
			"%s() with name %q builds device code the scanner cannot read; use triton.language and its libdevice", c.Func, c.NameArg)
	case asmNames[c.NameArg] && c.Func != "hasattr":
		fc.add(c.Line, c.Col, RuleClock,
			"%s() with name %q hides a call of inline assembly; call it directly with its assembly as a string literal", c.Func, c.NameArg)
	case dispatcherTables[c.NameArg] && c.Func != "hasattr":
		fc.add(c.Line, c.Col, RulePrivateAPI,
			"%s() with name %q reaches an operator's Python dispatcher tables, which are process-wide; remove it", c.Func, c.NameArg)
	}
	if c.Func == "getattr" && c.NameLiteral && fc.owners.mutators[c.NameArg] &&
		!(c.Target != "" && !strings.Contains(c.Target, ".") &&
			(fc.methodKind(c.TargetReceiver) == kindInstance || fc.instanceName(c.Target, fc.ff))) {
		fc.unboundMethod(c.Line, c.Col, "getattr(..., "+strconv.Quote(c.NameArg)+")")
	}
	if c.Func == "getattr" && c.NameLiteral && isIdentifier(c.NameArg) {
		// getattr(obj, "name") reads what obj.name does.
		mark := len(fc.findings)
		if c.Target != "" {
			fc.chain(c.Target+"."+c.NameArg, c.Line, c.Col, c.ModuleLevel)
		}
		fc.attributeRule(c.NameArg, mark, c.Line, c.Col, "getattr() of %q", c.NameArg)
	}
	if c.Func != "setattr" && c.Func != "delattr" {
		return
	}
	roots, shown := c.TargetRoots, "<expr>"
	if c.Target != "" {
		roots, shown = []string{topLevel(c.Target)}, c.Target
	}
	for _, r := range roots {
		if b, ok := fc.first(r); ok {
			fc.add(c.Line, c.Col, RuleGlobalMutation,
				"%s() on %q changes imported %q, which the engine shares; keep state in your own objects", c.Func, shown, displayModule(b.name))
			return
		}
	}
	if c.Target == "" || strings.Contains(c.Target, ".") || !(fc.ownedReceiver(c.TargetReceiver) || fc.ownedName(c.Target, fc.ff)) {
		fc.foreignStore(c.Line, c.Col, fmt.Sprintf("%s() on %q", c.Func, shown))
	}
}
