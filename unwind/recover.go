package unwind

import (
	"encoding/binary"
	"fmt"
	"strings"

	"github.com/kdumpsyms/kdumpsyms/memory"
)

// Going on past a first frame ORC cannot unwind.
//
// In a kdump capture the crashing CPU's registers are the ones
// crash_setup_regs saved inside __crash_kexec (arch/x86/include/asm/kexec.h,
// v4.x to v7.x): each register stored by an asm statement, rsp among them,
// and ip = _THIS_IP_ (include/linux/instruction_pointer.h), the address of
// a label the compiler places where it likes. rsp, though, is the function's
// stack pointer in its body, where it then calls crash_save_vmcoreinfo,
// machine_crash_shutdown and machine_kexec (kernel/crash_core.c, 6.x;
// kernel/kexec_core.c before). __crash_kexec itself is marked
// STACK_FRAME_NON_STANDARD there, so objtool gives it no entry at all:
// the undefined entry ending the function before it covers all of it.
// Two ways go on from it, tried in turn:
//
//  1. RecoverOwnORC: the ORC entries of the same function at its other
//     instructions. Each entry whose CFA is sp + offset (a call frame)
//     says where the return address would lie were rsp saved at that
//     instruction; a candidate is kept when the word there is a return
//     address (the instruction before it a call) and the ORC walk from it
//     reaches the end of the stack. One such slot, or one whose call is a
//     direct call to the function, is the answer; two are ambiguous.
//  2. RecoverScan: a scan up the stack from rsp to the stack's end
//     (THREAD_SIZE), as crash(8)'s x86_64 bt looks for a text address in
//     crash_kexec on a kdump's panic task: every word that is a return
//     address, checked the same way. The first whose call is a direct
//     call to the function holding the saved ip is the answer; without
//     one, the first indirect call, marked weak (Recovery.Weak): a call
//     through a pointer and a stale return address cannot be told apart,
//     and frames may be missing. A direct call to another address is
//     refused when the function is known (it called another function;
//     a call through a retpoline thunk not patched into an indirect call
//     is refused with it), and taken as weak when it is not.
//
// The work is bounded: at most maxOwnEntries entries of the function,
// StackSize/8 words of stack, maxRecoverWalks validating walks of at most
// MaxFrames frames each.
const (
	maxOwnEntries   = 512
	maxRecoverWalks = 16
	// funcPadding is the call padding before an x86_64 function
	// (CONFIG_FUNCTION_PADDING_BYTES, 16 on Debian's 6.x kernels), where
	// call depth tracking's thunk sits: a direct call to it is a call to
	// the function.
	funcPadding = 16
)

// How a Recovery found its frame.
const (
	RecoverOwnORC = "own ORC entries"
	RecoverScan   = "stack scan"
)

// CallKind is the instruction before a return address.
type CallKind int

const (
	CallNone     CallKind = iota
	CallDirect            // call rel32 to the function holding the first frame
	CallElse              // call rel32 to another address (a thunk, a tail-calling function)
	CallIndirect          // call through a register or memory
)

func (c CallKind) String() string {
	switch c {
	case CallDirect:
		return "a direct call to the function"
	case CallElse:
		return "a direct call to another address"
	case CallIndirect:
		return "an indirect call"
	}
	return "no call"
}

// Recovery says how a walk found a frame its unwinder's own rules did not
// give: the first frame had no usable entry (Cause), and the next frame's
// return address was found at Slot by Method.
type Recovery struct {
	Cause  error
	Method string // RecoverOwnORC or RecoverScan
	// SP is the saved stack pointer; Slot holds the return address (the
	// frame's stack pointer is Slot+8).
	SP, Slot uint64
	// Func is the start of the function holding the first frame, 0 when
	// unknown.
	Func uint64
	Call CallKind
	// Weak is true when neither the function's own ORC entries nor a
	// direct call to it confirm the frame: frames may be missing between.
	Weak bool
	// Tried is how many candidates were walked.
	Tried int
}

func (r *Recovery) String() string {
	var b strings.Builder
	switch r.Method {
	case RecoverOwnORC:
		fmt.Fprintf(&b, "the first frame's function's own ORC entries at its other instructions put the return address at sp+%#x (%#x)", r.Slot-r.SP, r.Slot)
	default:
		fmt.Fprintf(&b, "a scan up the stack from the saved sp %#x: the return address at sp+%#x (%#x)", r.SP, r.Slot-r.SP, r.Slot)
	}
	fmt.Fprintf(&b, ", after %s", r.Call)
	if r.Func != 0 && r.Call == CallDirect {
		fmt.Fprintf(&b, " at %#x", r.Func)
	}
	b.WriteString("; the ORC walk from it reaches the end of the stack")
	if r.Weak {
		b.WriteString(" (weak: nothing ties it to the first frame's function; frames between may be missing)")
	}
	return b.String()
}

// candidate is a return address a recovery tried.
type candidate struct {
	slot   uint64
	call   CallKind
	frames []Frame
	stop   Stop
}

// recover goes on from the first frame st, whose own entry failed with
// cause, as this file's comment says.
func (w *orcWalker) recover(st orcState, cause error) ([]Frame, Stop) {
	first := []Frame{{PC: st.ip}}
	var fnStart, fnEnd uint64
	haveFn := false
	if w.t.Func != nil {
		fnStart, fnEnd, haveFn = w.t.Func(st.ip)
		haveFn = haveFn && fnEnd > fnStart && fnEnd-fnStart <= 1<<24
	}
	if st.sp%8 != 0 {
		return first, Stop{Err: fmt.Errorf("%w; the saved sp %#x is misaligned, no stack to recover from", cause, st.sp)}
	}
	top := st.sp&^(w.opt.StackSize-1) + w.opt.StackSize // the stack's end
	if top == 0 {
		top = ^uint64(0) - 7
	}
	walks := 0
	var notes []string
	var rejected string // the first candidate's reason to fail
	try := func(slot uint64, e *orcEntry) (candidate, bool) {
		next := st
		next.signal, next.haveFull = false, false
		if e != nil {
			if stop, ok := w.step(*e, &next); !ok {
				if rejected == "" && stop.Err != nil {
					rejected = stop.Err.Error()
				}
				return candidate{}, false
			}
		} else {
			ret, err := memory.Uint64(w.kmem, binary.LittleEndian, slot)
			if err != nil {
				return candidate{}, false
			}
			next.ip, next.sp = ret, slot+8
		}
		if next.ip < w.opt.KernelStart {
			return candidate{}, false
		}
		c := candidate{slot: slot, call: w.callBefore(next.ip, fnStart, haveFn)}
		if c.call == CallNone || c.call == CallElse && haveFn {
			// With the function known, a direct call elsewhere is a call
			// of another function: taking it would skip a frame.
			return candidate{}, false
		}
		if e == nil {
			if ce, err := w.find(next.ip - 1); err != nil || ce.kind == kindUndefined {
				return candidate{}, false
			}
		}
		if walks >= maxRecoverWalks {
			return candidate{}, false
		}
		walks++
		stacks := 0
		if err := w.moved(next.sp, st.sp, kindCall, &stacks); err != nil {
			return candidate{}, false
		}
		c.frames, c.stop = w.walk(append(first[:1:1], Frame{PC: next.ip, FP: next.sp}), next, stacks)
		if !c.stop.Final {
			if rejected == "" {
				rejected = fmt.Sprintf("the return address %#x at %#x: %v", next.ip, slot, c.stop.Err)
			}
			return candidate{}, false
		}
		return c, true
	}
	accept := func(c candidate, method string) ([]Frame, Stop) {
		r := &Recovery{Cause: cause, Method: method, SP: st.sp, Slot: c.slot, Call: c.call, Tried: walks}
		if haveFn {
			r.Func = fnStart
		}
		r.Weak = method == RecoverScan && c.call != CallDirect
		c.frames[1].Recovered = r
		return c.frames, c.stop
	}

	// 1. The function's own entries.
	if haveFn {
		var found []candidate
		seen := map[uint64]bool{}
		w.ownEntries(fnStart, fnEnd, func(e orcEntry) {
			if e.kind != kindCall || e.spReg != orcRegSP || e.spOff < 8 {
				return
			}
			slot := st.sp + uint64(e.spOff) - 8
			if slot < st.sp || slot >= top || seen[slot] {
				return
			}
			seen[slot] = true
			if c, ok := try(slot, &e); ok {
				found = append(found, c)
			}
		})
		var direct []candidate
		for _, c := range found {
			if c.call == CallDirect {
				direct = append(direct, c)
			}
		}
		switch {
		case len(found) == 1:
			return accept(found[0], RecoverOwnORC)
		case len(direct) == 1:
			return accept(direct[0], RecoverOwnORC)
		case len(found) > 1:
			var at []string
			for _, c := range found {
				at = append(at, fmt.Sprintf("%#x", c.slot))
			}
			return first, Stop{Err: fmt.Errorf("%w; the function's own ORC entries lead to %d return addresses that each reach the end of the stack (at %s): ambiguous", cause, len(found), strings.Join(at, ", "))}
		}
		if len(seen) == 0 {
			notes = append(notes, fmt.Sprintf("the function at %#x has no ORC call entry with a CFA from sp", fnStart))
		} else {
			notes = append(notes, fmt.Sprintf("none of the %d slots the function's own ORC entries give (the function at %#x) leads to one", len(seen), fnStart))
		}
	}

	// 2. A scan up the stack.
	var weak *candidate
	words := 0
	for slot := st.sp; slot < top && walks < maxRecoverWalks; slot += 8 {
		words++
		v, err := memory.Uint64(w.kmem, binary.LittleEndian, slot)
		if err != nil {
			notes = append(notes, fmt.Sprintf("the stack at %#x cannot be read (%v)", slot, err))
			break
		}
		if v < w.opt.KernelStart {
			continue
		}
		c, ok := try(slot, nil)
		if !ok {
			continue
		}
		if c.call == CallDirect || !haveFn {
			// Without the function nothing is better than the first.
			return accept(c, RecoverScan)
		}
		if weak == nil {
			weak = &c
		}
	}
	if weak != nil {
		return accept(*weak, RecoverScan)
	}
	notes = append(notes, fmt.Sprintf("scanned %d words up from the saved sp %#x, walked %d return addresses", words, st.sp, walks))
	if walks >= maxRecoverWalks {
		notes = append(notes, fmt.Sprintf("stopped at %d", maxRecoverWalks))
	}
	if rejected != "" {
		notes = append(notes, "first refused: "+rejected)
	}
	return first, Stop{Err: fmt.Errorf("%w; no return address on the stack leads to the end of the stack: %s", cause, strings.Join(notes, "; "))}
}

// ownEntries calls f with each entry of the function [start, end): the
// one covering start, then those after it below end, at most
// maxOwnEntries.
func (w *orcWalker) ownEntries(start, end uint64, f func(orcEntry)) {
	t, i, err := w.locate(start)
	if err != nil {
		return
	}
	for n := 0; i < t.n && n < maxOwnEntries; i, n = i+1, n+1 {
		if n > 0 {
			if a, err := w.ipAt(t, i); err != nil || a >= end {
				return
			}
		}
		if e, err := w.decode(t, i); err == nil {
			f(e)
		}
	}
}

// callBefore says which call, if any, ends just before ret: call rel32
// (e8), to fn (or its padding) when haveFn, or elsewhere; call *%reg (ff
// d0+r, 41 ff d0+r); call *disp8(%reg) (ff 50+r); call *disp32(%reg) (ff
// 90+r); call *disp32(%rip) (ff 15); call *abs32 (ff 14 25). Unreadable
// text is no call.
func (w *orcWalker) callBefore(ret, fn uint64, haveFn bool) CallKind {
	if ret < 7 {
		return CallNone
	}
	var b [7]byte
	if err := memory.ReadFull(w.kmem, b[:], ret-7); err != nil {
		return CallNone
	}
	// b[7-k] is the first byte of a k-byte instruction ending at ret.
	// Bytes can read as more than one instruction: a direct call to the
	// function wins, then an indirect call, then a direct call elsewhere.
	direct := b[2] == 0xe8
	if direct && haveFn {
		target := ret + uint64(int64(int32(binary.LittleEndian.Uint32(b[3:]))))
		if target <= fn && fn-target <= funcPadding {
			return CallDirect
		}
	}
	reg := func(m byte, base byte) bool { return m >= base && m < base+8 && m != base+4 }
	switch {
	case b[5] == 0xff && b[6] >= 0xd0 && b[6] <= 0xd7, // call *%reg
		b[4] == 0x41 && b[5] == 0xff && b[6] >= 0xd0 && b[6] <= 0xd7, // call *%r8..r15
		b[4] == 0xff && reg(b[5], 0x50),                              // call *disp8(%reg)
		b[1] == 0xff && b[2] == 0x15,                                 // call *disp32(%rip)
		b[1] == 0xff && reg(b[2], 0x90),                              // call *disp32(%reg)
		b[0] == 0xff && b[1] == 0x14 && b[2] == 0x25:                 // call *abs32
		return CallIndirect
	case direct:
		return CallElse
	}
	return CallNone
}
