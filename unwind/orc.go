package unwind

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/kdumpsyms/kdumpsyms/memory"
)

// x86_64's ORC unwinder (arch/x86/kernel/unwind_orc.c, orc_types.h): for
// every code address, objtool records how to find the caller's stack
// pointer (the CFA: sp_reg + sp_offset) and frame pointer, and what the
// CFA points at: a return address (CALL), a struct pt_regs (REGS) or an
// iret frame (REGS_PARTIAL). __start_orc_unwind_ip holds the sorted
// addresses, each a 32-bit offset from its own slot; __start_orc_unwind the
// 6-byte entries in the same order: s16 sp_offset, s16 bp_offset, then a
// little-endian u16 of bit-fields whose layout changed twice:
//
//   - before 6.3: sp_reg:4, bp_reg:4, type:2 (CALL 0, REGS 1, REGS_PARTIAL
//     2), end:1;
//   - 6.3: sp_reg:4, bp_reg:4, type:2, signal:1, end:1;
//   - 6.4 on: sp_reg:4, bp_reg:4, type:3 (UNDEFINED 0, END_OF_STACK 1,
//     CALL 2, REGS 3, REGS_PARTIAL 4), signal:1.
//
// The base registers (ORC_REG_*) were numbered UNDEFINED 0, PREV_SP 1,
// DX 2, DI 3, BP 4, SP 5, R10 6, R13 7, BP_INDIRECT 8, SP_INDIRECT 9 up to
// 7.0; 7.1 renumbered them and added AX (a CFA in rax, for Clang's DRAP
// sequence): UNDEFINED 0, AX 1, DX 2, SP 3, BP 4, DI 5, R10 6, R13 7,
// PREV_SP 8, SP_INDIRECT 9, BP_INDIRECT 10 (Debian's 7.1.5, 7.1.8, 7.2.13
// and 7.3.4 headers; 7.0.4 and 7.0.12 still have the old numbers). The
// entry layout did not change.
//
// Each module has tables of the same layout, reached through struct
// module's arch member (struct mod_arch_specific: num_orcs, orc_unwind_ip,
// orc_unwind); the kernel refuses at load time a module whose .orc_header
// differs from vmlinux's, so one format serves both.
//
// Since 6.4 (commit "x86/unwind/orc: Add ELF section with ORC version
// identifier"), vmlinux's .orc_header (__start_orc_header) holds 20 bytes:
// the SHA-1 of orc_types.h's ORC_REG_* and ORC_TYPE_* lines and struct
// orc_entry (scripts/orc_hash.sh). A hash names the entry format and the
// register numbering exactly; ORC refuses one it does not know rather
// than guess, and uses the release only for kernels without the header
// (docs/formats.md §10).

// ORCFormat is the orc_entry layout of a kernel.
type ORCFormat int

const (
	ORCBefore63 ORCFormat = iota // 4.14 to 6.2
	ORC63                        // 6.3: signal bit added
	ORC64                        // 6.4 to 7.0: 3-bit type, no end bit
	ORC71                        // 7.1 and later: 6.4's entry, base registers renumbered
)

// ORCFormatFor returns the layout of kernel major.minor.
func ORCFormatFor(major, minor int) ORCFormat {
	switch {
	case major > 7 || major == 7 && minor >= 1:
		return ORC71
	case major > 6 || major == 6 && minor >= 4:
		return ORC64
	case major == 6 && minor == 3:
		return ORC63
	}
	return ORCBefore63
}

// ORCTables locates vmlinux's ORC tables: the addresses of
// __start_orc_unwind_ip, __stop_orc_unwind_ip and __start_orc_unwind.
type ORCTables struct {
	IPStart, IPStop, Entries uint64
	// Format is the entry layout, from the release; Header, when set,
	// overrides it.
	Format ORCFormat
	// Header is the 20-byte hash of .orc_header (6.4+), nil for kernels
	// without one.
	Header []byte
	// Modules are the modules' tables, one per text region; ModulesErr
	// says why they are absent (it is reported when a frame is in none
	// of them and not in vmlinux's).
	Modules    []ORCModule
	ModulesErr error
	// LoadModules, when set and Modules and ModulesErr are not, gives them
	// on first need: a walk that never leaves vmlinux's text never reads
	// the module list (and the BTF its layout needs).
	LoadModules func() ([]ORCModule, error)
	// MayBeModule, when set, says whether an address can be in a module's
	// text at all; LoadModules is not called for one that cannot (a user
	// address the walk ends at, for one).
	MayBeModule func(addr uint64) bool
	// Func, when set, gives the function holding a code address: its
	// start and end (from the symbols). A first frame without a usable
	// entry is recovered from better with it (see Recovery).
	Func func(addr uint64) (start, end uint64, ok bool)
}

// format is the entry layout of t: the one its Header names when it has
// one, else Format.
func (t ORCTables) format() (ORCFormat, error) {
	if t.Header == nil {
		return t.Format, nil
	}
	return ORCFormatForHeader(t.Header)
}

// ORCModule is one module's ORC tables for one of its text regions
// [Start, End): N entries of orc_unwind_ip at IP, of orc_unwind at
// Entries (the module's arch.orc_unwind_ip, arch.orc_unwind, num_orcs).
type ORCModule struct {
	Name           string
	Start, End     uint64
	IP, Entries, N uint64
	// TextSize is the module's whole text (all its text regions share
	// one table); 0 means End-Start.
	TextSize uint64
}

// orcHashes maps the .orc_header hashes this package decodes to their
// format. Each is the SHA-1 of the ORC_REG_* and ORC_TYPE_* lines and
// struct orc_entry of orc_types.h (scripts/orc_hash.sh), checked against
// Debian's headers packages:
//   - fe5d32bf…: 6.4 to 7.0 (3-bit type, signal bit, UNDEFINED 0 …
//     SP_INDIRECT 9; Debian 6.12.117, 7.0.4, 7.0.12), in the deb13-6.12
//     dumps' __start_orc_header;
//   - 137c36ad…: 7.1 on, registers renumbered (Debian 7.1.5, 7.1.8,
//     7.2.13, 7.3.4), in the deb14-7.2-amd64 dumps';
//   - edfa4d15…: 6.4's header plus "#define ORC_REG_AX 10", as upstream
//     96f3b16a9de5 ("objtool: Support Clang RAX DRAP sequence") first
//     proposed it, computed from that patch: no Debian kernel has it, but a
//     hash names one header exactly, so a kernel that does decodes right.
var orcHashes = map[[20]byte]ORCFormat{
	{0x13, 0x7c, 0x36, 0xad, 0x76, 0x27, 0xc4, 0xdd, 0x55, 0x93, 0x21, 0x76, 0xbb, 0x0e, 0xcd, 0xbd, 0x50, 0x41, 0xfc, 0x82}: ORC71,
	{0xed, 0xfa, 0x4d, 0x15, 0x55, 0x2f, 0xdd, 0x2e, 0x1d, 0x56, 0x67, 0x97, 0x28, 0x41, 0x63, 0x79, 0xf2, 0xfe, 0x45, 0x34}: ORC64,
	{0xfe, 0x5d, 0x32, 0xbf, 0x58, 0x1b, 0xd6, 0x3b, 0x2c, 0xa9, 0xa5, 0xc6, 0x5b, 0xa5, 0xa6, 0x25, 0xea, 0xb3, 0xfe, 0x24}: ORC64,
}

// ORCHeaderSize is the length of .orc_header's hash.
const ORCHeaderSize = 20

// ErrORCFormat means the kernel's .orc_header names an ORC entry format
// this package does not know.
var ErrORCFormat = errors.New("unwind: unknown ORC entry format")

// ORCFormatForHeader returns the format the .orc_header hash h names, or
// an error wrapping ErrORCFormat that gives the hash.
func ORCFormatForHeader(h []byte) (ORCFormat, error) {
	if len(h) != ORCHeaderSize {
		return 0, fmt.Errorf("%w: .orc_header of %d bytes, want %d", ErrORCFormat, len(h), ORCHeaderSize)
	}
	if f, ok := orcHashes[[20]byte(h)]; ok {
		return f, nil
	}
	return 0, fmt.Errorf("%w: .orc_header hash %x is not one this unwinder decodes (it knows 6.4's fe5d32bf…, 7.1's 137c36ad… and edfa4d15…)", ErrORCFormat, h)
}

// MaxModuleORCs bounds a module's num_orcs by its text: an entry starts
// at a distinct code address, plus a terminator per text section; the
// slack covers the sections.
func MaxModuleORCs(textSize uint64) uint64 { return min(textSize+256, maxORCEntries) }

// maxORCEntries bounds the tables: a 6.12 Debian vmlinux has about 450,000
// entries; 2^24 leaves room for any real kernel.
const maxORCEntries = 1 << 24

// orcBase is a base register of an ORC entry, whatever number the
// kernel's ORC_REG_* gives it.
type orcBase int

const (
	orcRegUndefined orcBase = iota
	orcRegPrevSP
	orcRegDX
	orcRegDI
	orcRegBP
	orcRegSP
	orcRegR10
	orcRegR13
	orcRegBPIndirect
	orcRegSPIndirect
	orcRegAX
	orcRegUnknown // a number the kernel does not define
)

// orcBaseNames are the names ORCEntry gives the base registers (objtool's
// orc dump's).
var orcBaseNames = [...]string{
	orcRegUndefined: "undefined", orcRegPrevSP: "prevsp", orcRegDX: "dx", orcRegDI: "di",
	orcRegBP: "bp", orcRegSP: "sp", orcRegR10: "r10", orcRegR13: "r13",
	orcRegBPIndirect: "bp(ind)", orcRegSPIndirect: "sp(ind)", orcRegAX: "ax", orcRegUnknown: "?",
}

// orcRegsBefore71 and orcRegs71 map a kernel's ORC_REG_* numbers to base
// registers: up to 7.0 (10 is the AX of the edfa4d15… header, never
// emitted by the others), and from 7.1.
var (
	orcRegsBefore71 = [16]orcBase{orcRegUndefined, orcRegPrevSP, orcRegDX, orcRegDI, orcRegBP, orcRegSP, orcRegR10, orcRegR13,
		orcRegBPIndirect, orcRegSPIndirect, orcRegAX, orcRegUnknown, orcRegUnknown, orcRegUnknown, orcRegUnknown, orcRegUnknown}
	orcRegs71 = [16]orcBase{orcRegUndefined, orcRegAX, orcRegDX, orcRegSP, orcRegBP, orcRegDI, orcRegR10, orcRegR13,
		orcRegPrevSP, orcRegSPIndirect, orcRegBPIndirect, orcRegUnknown, orcRegUnknown, orcRegUnknown, orcRegUnknown, orcRegUnknown}
)

type orcEntry struct {
	spOff, bpOff   int16
	spRaw, bpRaw   int     // the kernel's ORC_REG_* numbers
	spReg, bpReg   orcBase // what they name
	kind           int     // normalized: kindCall, kindRegs, kindIret, kindEnd, kindUndefined
	signal, endBit bool
}

const (
	kindCall = iota
	kindRegs
	kindIret
	kindEnd
	kindUndefined
)

// pt_regs (and PRSTATUS's user_regs_struct) word indexes on x86_64.
const (
	regR13 = 2
	regBP  = 4
	regR10 = 7
	regAX  = 10
	regDX  = 12
	regDI  = 14
	regIP  = 16
	regCS  = 17
	regSP  = 19
	nRegs  = 21 // through ss: a struct pt_regs
)

// ErrNoORC means the walk reached an address vmlinux's ORC tables do not
// cover (a module, BPF code, or not code at all).
var ErrNoORC = errors.New("unwind: no ORC entry")

type orcWalker struct {
	kmem   memory.Reader
	t      ORCTables
	format ORCFormat
	n      uint64
	opt    Options // limits set
}

// orcTable is one table to search: vmlinux's or a module's.
type orcTable struct {
	name        string // "" for vmlinux
	ip, entries uint64
	n           uint64
}

func (w *orcWalker) ipAt(t orcTable, i uint64) (uint64, error) {
	a := t.ip + 4*i
	v, err := memory.Uint32(w.kmem, binary.LittleEndian, a)
	return a + uint64(int64(int32(v))), err
}

// inVmlinux reports whether ip lies between vmlinux's first and last ORC
// addresses (where no module's text can be); unreadable ends count as no.
func (w *orcWalker) inVmlinux(t orcTable, ip uint64) bool {
	if t.n == 0 {
		return false
	}
	first, err1 := w.ipAt(t, 0)
	last, err2 := w.ipAt(t, t.n-1)
	return err1 == nil && err2 == nil && ip >= first && ip <= last
}

// find returns the entry covering ip: the last one whose address is <= ip
// (as the kernel's __orc_find), in the table of the module whose text
// holds ip, else in vmlinux's.
func (w *orcWalker) find(ip uint64) (orcEntry, error) {
	t, i, err := w.locate(ip)
	if err != nil {
		return orcEntry{}, err
	}
	return w.decode(t, i)
}

// locate returns the table holding ip's entry and the entry's index.
func (w *orcWalker) locate(ip uint64) (orcTable, uint64, error) {
	t := orcTable{ip: w.t.IPStart, entries: w.t.Entries, n: w.n}
	if w.t.LoadModules != nil && w.t.Modules == nil && w.t.ModulesErr == nil &&
		(w.t.MayBeModule == nil || w.t.MayBeModule(ip)) && !w.inVmlinux(t, ip) {
		w.t.Modules, w.t.ModulesErr = w.t.LoadModules()
		w.t.LoadModules = nil
	}
	for _, m := range w.t.Modules {
		if ip >= m.Start && ip < m.End {
			text := m.TextSize
			if text == 0 {
				text = m.End - m.Start
			}
			if m.N > MaxModuleORCs(text) {
				// A num_orcs no text of this size could need: damage,
				// not a table to search.
				return t, 0, fmt.Errorf("%#x [%s]: num_orcs %d for %d bytes of text: %w", ip, m.Name, m.N, text, ErrBadFrame)
			}
			t = orcTable{name: m.Name, ip: m.IP, entries: m.Entries, n: m.N}
			break
		}
	}
	where := t.where()
	if t.n == 0 {
		return t, 0, fmt.Errorf("%#x%s: the module has no ORC entries: %w", ip, where, ErrNoORC)
	}
	lo, hi := uint64(0), t.n // the answer is in [lo, hi)
	first, err := w.ipAt(t, 0)
	if err != nil {
		return t, 0, fmt.Errorf("orc_unwind_ip%s: %w", where, err)
	}
	if ip < first {
		if t.name == "" && w.t.ModulesErr != nil {
			return t, 0, fmt.Errorf("%#x: %w (no module's tables: %w)", ip, ErrNoORC, w.t.ModulesErr)
		}
		return t, 0, fmt.Errorf("%#x%s: %w", ip, where, ErrNoORC)
	}
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		a, err := w.ipAt(t, mid)
		if err != nil {
			return t, 0, fmt.Errorf("orc_unwind_ip%s: %w", where, err)
		}
		if a <= ip {
			lo = mid
		} else {
			hi = mid
		}
	}
	if lo == t.n-1 && t.name == "" {
		// The last entry is the end of the text (a terminator): nothing
		// past it is covered. (A module's text region bounds its lookups;
		// its own terminators decode as undefined entries.)
		if last, _ := w.ipAt(t, lo); ip != last {
			if w.t.ModulesErr != nil {
				return t, 0, fmt.Errorf("%#x past the last ORC address: %w (no module's tables: %w)", ip, ErrNoORC, w.t.ModulesErr)
			}
			return t, 0, fmt.Errorf("%#x past the last ORC address: %w", ip, ErrNoORC)
		}
	}
	return t, lo, nil
}

func (t orcTable) where() string {
	if t.name != "" {
		return " [" + t.name + "]"
	}
	return ""
}

// decode reads entry i of table t.
func (w *orcWalker) decode(t orcTable, i uint64) (orcEntry, error) {
	var b [6]byte
	if err := memory.ReadFull(w.kmem, b[:], t.entries+6*i); err != nil {
		return orcEntry{}, fmt.Errorf("orc_unwind%s entry %d: %w", t.where(), i, err)
	}
	bits := binary.LittleEndian.Uint16(b[4:])
	e := orcEntry{
		spOff: int16(binary.LittleEndian.Uint16(b[0:])),
		bpOff: int16(binary.LittleEndian.Uint16(b[2:])),
		spRaw: int(bits & 15),
		bpRaw: int(bits >> 4 & 15),
	}
	regs := &orcRegsBefore71
	if w.format == ORC71 {
		regs = &orcRegs71
	}
	e.spReg, e.bpReg = regs[e.spRaw], regs[e.bpRaw]
	switch w.format {
	case ORC64, ORC71:
		e.signal = bits>>11&1 != 0
		switch bits >> 8 & 7 {
		case 0:
			e.kind = kindUndefined
		case 1:
			e.kind = kindEnd
		case 2:
			e.kind = kindCall
		case 3:
			e.kind = kindRegs
		case 4:
			e.kind = kindIret
		default:
			e.kind = kindUndefined
		}
	default:
		e.kind = int(bits >> 8 & 3) // CALL 0, REGS 1, REGS_PARTIAL 2 match kindCall..kindIret
		if e.kind == 3 {
			e.kind = kindUndefined
		}
		if w.format == ORC63 {
			e.signal = bits>>10&1 != 0
			e.endBit = bits>>11&1 != 0
		} else {
			e.endBit = bits>>10&1 != 0
		}
		if e.spReg == orcRegUndefined {
			if e.endBit {
				e.kind = kindEnd
			} else {
				e.kind = kindUndefined
			}
		}
	}
	return e, nil
}

// ORC walks x86_64 frames from the saved registers regs (PRSTATUS's
// user_regs_struct: r15 … rip (16), cs, eflags, rsp (19), ss) with vmlinux's
// ORC tables, as the kernel's unwind_next_frame does: through calls,
// pt_regs of interrupts and exceptions, and iret frames, to the entry from
// user space or the end-of-stack hint. It reads little-endian 64-bit
// memory whatever Options.Target says.
//
// When the first frame's address has no usable entry (undefined, or no
// table covers it), as for the registers crash_setup_regs saves in a kdump
// capture, the walk goes on from a return address found on the stack the
// way recover.go describes, and the frame found that way carries a
// Recovery saying how; where none is found, the stop says why.
func ORC(kmem memory.Reader, regs []uint64, t ORCTables, opt Options) ([]Frame, Stop) {
	if len(regs) < nRegs {
		return nil, Stop{Err: fmt.Errorf("unwind: %d registers, want %d: %w", len(regs), nRegs, ErrBadFrame)}
	}
	w, err := newORCWalker(kmem, t, opt)
	if err != nil {
		return nil, Stop{Err: err}
	}
	st := orcState{ip: regs[regIP], sp: regs[regSP], bp: regs[regBP], haveFull: true, signal: true}
	copy(st.full[:], regs)
	frames := []Frame{{PC: st.ip}}
	e, err := w.find(st.ip)
	switch {
	case err == nil && e.kind == kindUndefined:
		return w.recover(st, fmt.Errorf("ORC entry for %#x is undefined: %w", st.ip, ErrBadFrame))
	case errors.Is(err, ErrNoORC):
		return w.recover(st, err)
	}
	return w.walk(frames, st, 0)
}

func newORCWalker(kmem memory.Reader, t ORCTables, opt Options) (*orcWalker, error) {
	opt.setLimits()
	if t.IPStop < t.IPStart || (t.IPStop-t.IPStart)%4 != 0 || (t.IPStop-t.IPStart)/4 == 0 || (t.IPStop-t.IPStart)/4 > maxORCEntries {
		return nil, fmt.Errorf("unwind: orc_unwind_ip [%#x, %#x) is not a table of 1 to %d entries: %w", t.IPStart, t.IPStop, maxORCEntries, ErrBadFrame)
	}
	format, err := t.format()
	if err != nil {
		return nil, err
	}
	return &orcWalker{kmem: kmem, t: t, format: format, n: (t.IPStop - t.IPStart) / 4, opt: opt}, nil
}

// ORCSwitched walks the stack of an x86_64 task that is switched out,
// from what __switch_to_asm left at its thread.sp (struct
// inactive_task_frame): ip is the frame's ret_addr, a return address into
// the scheduler, sp the stack pointer above the frame and bp the frame's
// saved bp, as the kernel's unwind_start does for a task other than
// current (arch/x86/kernel/unwind_orc.c, 6.1 and 6.12). The first frame
// is ip; the walk goes on as ORC's.
func ORCSwitched(kmem memory.Reader, ip, sp, bp uint64, t ORCTables, opt Options) ([]Frame, Stop) {
	w, err := newORCWalker(kmem, t, opt)
	if err != nil {
		return nil, Stop{Err: err}
	}
	return w.walk([]Frame{{PC: ip}}, orcState{ip: ip, sp: sp, bp: bp}, 0)
}

// orcState is where a walk is: the frame's address, stack and frame
// pointers, and the registers known in full (the first frame's, or a
// pt_regs').
type orcState struct {
	ip, sp, bp uint64
	full       [nRegs]uint64
	haveFull   bool
	// signal says ip is where the CPU was, not a return address.
	signal bool
}

// walk goes on from st, whose frame is frames' last, up to MaxFrames
// frames; stacks counts the moves between stacks so far.
func (w *orcWalker) walk(frames []Frame, st orcState, stacks int) ([]Frame, Stop) {
	for len(frames) < w.opt.MaxFrames {
		look := st.ip
		if !st.signal {
			look-- // a return address may be past the end of its call's function
		}
		e, err := w.find(look)
		if err != nil {
			return frames, Stop{Err: err}
		}
		prev := st
		if stop, ok := w.step(e, &st); !ok {
			return frames, stop
		}
		frames = append(frames, Frame{PC: st.ip, FP: st.sp})
		if err := w.moved(st.sp, prev.sp, e.kind, &stacks); err != nil {
			return frames, Stop{Err: err}
		}
	}
	return frames, Stop{Err: fmt.Errorf("more than %d frames: %w", w.opt.MaxFrames, ErrBadFrame)}
}

// moved checks a step from the stack pointer prevSP to sp: the stack only
// grows toward the caller, except on a move from an interrupt or
// exception stack to the one it interrupted, which stacks counts.
func (w *orcWalker) moved(sp, prevSP uint64, kind int, stacks *int) error {
	size := w.opt.StackSize
	same := sp&^(size-1) == prevSP&^(size-1)
	switch {
	case same && sp <= prevSP && kind == kindCall:
		return fmt.Errorf("stack pointer %#x after %#x goes back down its stack: %w", sp, prevSP, ErrBadFrame)
	case !same:
		*stacks++
		if *stacks > w.opt.MaxStacks {
			return fmt.Errorf("stack pointer %#x: more than %d stack changes: %w", sp, w.opt.MaxStacks, ErrBadFrame)
		}
	}
	return nil
}

// step moves st from its frame to the caller's with e, the entry covering
// its address. It returns false and why when the walk ends there.
func (w *orcWalker) step(e orcEntry, st *orcState) (Stop, bool) {
	ip := st.ip
	read := func(a uint64) (uint64, error) { return memory.Uint64(w.kmem, binary.LittleEndian, a) }
	switch e.kind {
	case kindEnd:
		return Stop{Final: true, Why: "end-of-stack hint"}, false
	case kindUndefined:
		return Stop{Err: fmt.Errorf("ORC entry for %#x is undefined: %w", ip, ErrBadFrame)}, false
	}
	var cfa uint64
	var err error
	indirect := false
	switch e.spReg {
	case orcRegSP:
		cfa = st.sp + uint64(int64(e.spOff))
	case orcRegBP:
		cfa = st.bp + uint64(int64(e.spOff))
	case orcRegSPIndirect:
		cfa, indirect = st.sp, true
	case orcRegBPIndirect:
		cfa, indirect = st.bp+uint64(int64(e.spOff)), true
	case orcRegR10, orcRegR13, orcRegDI, orcRegDX, orcRegAX:
		if !st.haveFull {
			return Stop{Err: fmt.Errorf("ORC entry for %#x needs a register not saved in this frame: %w", ip, ErrBadFrame)}, false
		}
		i := map[orcBase]int{orcRegR10: regR10, orcRegR13: regR13, orcRegDI: regDI, orcRegDX: regDX, orcRegAX: regAX}[e.spReg]
		cfa = st.full[i] + uint64(int64(e.spOff))
	default:
		return Stop{Err: fmt.Errorf("ORC entry for %#x: sp_reg %d: %w", ip, e.spRaw, ErrBadFrame)}, false
	}
	if indirect {
		if cfa, err = read(cfa); err != nil {
			return Stop{Err: fmt.Errorf("indirect stack pointer: %w", err)}, false
		}
		if e.spReg == orcRegSPIndirect {
			cfa += uint64(int64(e.spOff))
		}
	}
	switch e.kind {
	case kindCall:
		ret, err := read(cfa - 8)
		if err != nil {
			return Stop{Err: fmt.Errorf("return address at %#x: %w", cfa-8, err)}, false
		}
		st.ip, st.sp, st.signal, st.haveFull = ret, cfa, e.signal, false
	case kindRegs:
		var b [nRegs * 8]byte
		if err := memory.ReadFull(w.kmem, b[:], cfa); err != nil {
			return Stop{Err: fmt.Errorf("pt_regs at %#x: %w", cfa, err)}, false
		}
		for i := range st.full {
			st.full[i] = binary.LittleEndian.Uint64(b[8*i:])
		}
		st.haveFull, st.signal = true, true
		if st.full[regCS]&3 == 3 {
			return Stop{Final: true, Why: "entry from user space"}, false
		}
		st.ip, st.sp = st.full[regIP], st.full[regSP]
	case kindIret:
		// cfa points at the iret frame: ip, cs, flags, sp, ss.
		var b [40]byte
		if err := memory.ReadFull(w.kmem, b[:], cfa); err != nil {
			return Stop{Err: fmt.Errorf("iret frame at %#x: %w", cfa, err)}, false
		}
		if binary.LittleEndian.Uint64(b[8:])&3 == 3 {
			return Stop{Final: true, Why: "entry from user space"}, false
		}
		st.ip, st.sp = binary.LittleEndian.Uint64(b[0:]), binary.LittleEndian.Uint64(b[24:])
		st.haveFull, st.signal = false, true
	}
	switch e.bpReg {
	case orcRegUndefined:
		if st.haveFull {
			st.bp = st.full[regBP]
		}
	case orcRegPrevSP:
		if st.bp, err = read(cfa + uint64(int64(e.bpOff))); err != nil {
			return Stop{Err: fmt.Errorf("saved rbp: %w", err)}, false
		}
	case orcRegBP:
		if st.bp, err = read(st.bp + uint64(int64(e.bpOff))); err != nil {
			return Stop{Err: fmt.Errorf("saved rbp: %w", err)}, false
		}
	default:
		return Stop{Err: fmt.Errorf("ORC entry for %#x: bp_reg %d: %w", st.ip, e.bpRaw, ErrBadFrame)}, false
	}
	if st.ip < w.opt.KernelStart {
		return Stop{Err: fmt.Errorf("return address %#x is not in the kernel: %w", st.ip, ErrBadFrame)}, false
	}
	return Stop{}, true
}

// ORCEntry is a decoded orc_entry: how to find the caller's frame at one
// code address. SPReg and BPReg are the kernel's ORC_REG_* numbers, whose
// meaning changed in 7.1 (see ORCFormat); SPBase and BPBase name the
// registers: "sp", "bp", "prevsp", "undefined", "dx", "di", "r10", "r13",
// "sp(ind)", "bp(ind)", "ax", or "?" for a number the kernel does not
// define. Type is "call", "regs", "regs_partial", "end" or "undefined".
type ORCEntry struct {
	SPReg, BPReg       int
	SPBase, BPBase     string
	SPOffset, BPOffset int16
	Type               string
	Signal             bool
}

// ORCLookup returns the entry covering ip in vmlinux's or, for an address
// in a module's text, that module's tables (the kernel's orc_find), in
// the format t names.
func ORCLookup(kmem memory.Reader, t ORCTables, ip uint64) (ORCEntry, error) {
	n := (t.IPStop - t.IPStart) / 4
	if t.IPStop < t.IPStart || n == 0 || n > maxORCEntries {
		return ORCEntry{}, fmt.Errorf("unwind: orc_unwind_ip [%#x, %#x): %w", t.IPStart, t.IPStop, ErrBadFrame)
	}
	format, err := t.format()
	if err != nil {
		return ORCEntry{}, err
	}
	w := &orcWalker{kmem: kmem, t: t, format: format, n: n}
	e, err := w.find(ip)
	if err != nil {
		return ORCEntry{}, err
	}
	kinds := map[int]string{kindCall: "call", kindRegs: "regs", kindIret: "regs_partial", kindEnd: "end", kindUndefined: "undefined"}
	return ORCEntry{SPReg: e.spRaw, BPReg: e.bpRaw, SPBase: orcBaseNames[e.spReg], BPBase: orcBaseNames[e.bpReg],
		SPOffset: e.spOff, BPOffset: e.bpOff, Type: kinds[e.kind], Signal: e.signal}, nil
}
