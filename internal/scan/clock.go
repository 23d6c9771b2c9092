package scan

import (
	"errors"
	"fmt"
	"regexp"
)

// Clocks: what reads the time. Verify's calls come at other moments than
// served ones: one at a time with the worker's reads, checks and dumps
// between them, where an engine's layers call each other microseconds
// apart. A kernel that reads a clock can tell the two apart (how long
// since its last call) and be honest only while graded. The time module
// is not importable; what is refused here reaches a clock through what
// is: a CUDA event's timer, the autotuner's timings, Triton's global
// timer, the clock, counter and placement registers of inline assembly
// and device code built from text. Inline assembly stays legal (honest
// kernels use it for conversions and fast math) where the scanner can
// read its text: a string literal, a choice between literals or a module
// constant bound once to one (astfacts._asm).

// clockNames are attributes that read a clock, refused on any object
// (also through getattr with a literal name).
var clockNames = map[string]string{
	"elapsed_time":    "a CUDA event's timer",
	"globaltimer":     "the GPU's global timer",
	"configs_timings": "the autotuner's timings of its configs",
	"bench_time":      "the autotuner's wall clock",
	"smid":            "the multiprocessor a block runs on (another on a busy device)",
}

// deviceCodeNames build device code the scanner cannot read, refused on
// any object: Triton's external-function call (any LLVM or NVVM
// intrinsic by name, llvm.nvvm.read.ptx.sreg.globaltimer among them) and
// its IR builder's inline assembly and external calls. Their route in
// (the builtin and extern decorators, which hand a function Triton's
// semantic and builder) is refused by the attribute allow-list.
var deviceCodeNames = map[string]bool{
	"extern_elementwise": true, "create_inline_asm": true, "create_extern_elementwise": true,
}

// asmNames are Triton's inline assembly builders: their assembly text must
// be a string literal, and they must be called where they are named.
var asmNames = map[string]bool{"inline_asm_elementwise": true, "inline_asm": true}

// asmClockRegister matches PTX's special registers that read a clock, a
// counter or the launch's place among others, by their exact names (a
// kernel's own register, %clocked or %pm0a, is not one): %clock,
// %clock_hi, %clock64, %globaltimer(_lo, _hi), %pm0-%pm7 (and _64),
// %gridid (the launch's number in its context), %current_graph_exec,
// %envreg0-31, %smid and %nsmid (where a block landed: elsewhere on a
// busy device).
var asmClockRegister = regexp.MustCompile(`%(clock|clock_hi|clock64|globaltimer|globaltimer_lo|globaltimer_hi|pm[0-7]|pm[0-7]_64|gridid|current_graph_exec|envreg[0-9]+|smid|nsmid)\b`)

// asmVariant matches LLVM's alternative syntax in inline assembly text,
// $( A $| B $): LLVM prints one alternative, so the text PTX receives is
// not the text written ("%glo$(baltimer$)" reads %globaltimer).
var asmVariant = regexp.MustCompile(`\$[(|)]`)

// maxAsm bounds an assembly text in the facts.
const maxAsm = 1 << 16

// asmFact is a call of an inline assembly builder: whether the scanner
// can read its assembly text (the first argument, or asm=), and every
// text it can be, one per line.
type asmFact struct {
	Literal bool   `json:"literal"`
	Text    string `json:"text"`
	Line    int    `json:"line"`
	Col     int    `json:"col"`
}

// checkAsms validates the asm facts of one file line.
func checkAsms(asms []asmFact) error {
	for _, a := range asms {
		if len(a.Text) > maxAsm || (!a.Literal && a.Text != "") {
			return errors.New("asm: text too long or given without a literal")
		}
		if err := checkPos(a.Line, a.Col); err != nil {
			return fmt.Errorf("asm: %w", err)
		}
	}
	return nil
}

// clockAttr refuses a clock name anywhere in an attribute chain, and an
// inline assembly builder that the chain does not call.
func (fc *fileCheck) clockAttr(a attrFact) {
	for i, name := range a.Attrs {
		if what, ok := clockNames[name]; ok {
			fc.add(a.Line, a.Col, RuleClock,
				"access to %s reads %s, which tells verify's calls from served ones; remove it", name, what)
			return
		}
		if deviceCodeNames[name] {
			fc.add(a.Line, a.Col, RuleClock,
				"access to %s builds device code the scanner cannot read (any intrinsic by name, a clock among them); use triton.language and its libdevice", name)
			return
		}
		if asmNames[name] && (i != len(a.Attrs)-1 || !a.Called) {
			fc.add(a.Line, a.Col, RuleClock,
				"%s is used without being called where it is named; call it directly with its assembly as a string literal", name)
			return
		}
	}
}

// clocks refuses what reads a clock outside attribute chains: inline
// assembly whose text the scanner cannot read, or that names a clock,
// counter or placement register or uses LLVM's alternative syntax, and a
// builder named as a bare value or imported under another name.
func (fc *fileCheck) clocks(ff *fileFacts) {
	for _, a := range ff.Asm {
		switch {
		case !a.Literal:
			fc.add(a.Line, a.Col, RuleClock,
				"inline assembly whose text the scanner cannot read (not a string literal, a choice between literals or a module constant bound once to one): write the text out")
		case asmVariant.MatchString(a.Text):
			fc.add(a.Line, a.Col, RuleClock,
				"inline assembly uses LLVM's alternative syntax ($( $| $)), so the text the GPU receives is not the text written; write it out")
		case asmClockRegister.MatchString(a.Text):
			fc.add(a.Line, a.Col, RuleClock,
				"inline assembly reads %s, a clock, counter or placement register, which tells verify's calls from served ones; remove it",
				asmClockRegister.FindString(a.Text))
		}
	}
	for _, n := range ff.Names {
		if asmNames[n.Name] && n.Ctx == "load" {
			fc.add(n.Line, n.Col, RuleClock,
				"%s is used without being called where it is named; call it directly with its assembly as a string literal", n.Name)
		}
	}
	for _, im := range ff.Imports {
		for _, n := range im.Names {
			if asmNames[n.Name] && n.AsName != "" && n.AsName != n.Name {
				fc.add(im.Line, im.Col, RuleClock,
					"%s is imported as %s: call it by its own name, so that the scanner sees its assembly", n.Name, n.AsName)
			}
		}
	}
}
