package bpfsyms

import (
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/kdumpsyms/kdumpsyms/memory"
	"github.com/kdumpsyms/kdumpsyms/symfinder"
)

// bpfSymType is BPF_SYM_ELF_TYPE, the letter every [bpf] line carries.
const bpfSymType = 't'

// oldKsymNameLen is KSYM_NAME_LEN of the kernels with the pre-v5.7 layout
// (128 until v6.1): bpf_get_prog_name truncates to KSYM_NAME_LEN-1 bytes.
const oldKsymNameLen = 128

// dataWitness is a data symbol every kernel has: its presence shows that
// kallsyms lists data symbols (CONFIG_KALLSYMS_ALL), so that a data symbol
// it lacks is one the kernel lacks.
const dataWitness = "init_task"

// textWitness is a function every kernel has: its presence shows that
// Code.Func reads a real symbol table.
const textWitness = "schedule"

// LoadBPF walks the kernel's bpf_kallsyms list and returns its entries as
// a set named "bpf": type 't', module "bpf", each of size end-start so that
// an address past an image's end is not in it.
//
// A kernel whose kallsyms has data symbols but no bpf_kallsyms, or (with
// Options.Code) text symbols but no bpf_get_kallsym, was built without
// CONFIG_BPF_JIT: its set is empty, with no error. A nil set comes
// with an error wrapping ErrMissingInfo (no bpf_kallsyms symbol in a
// kallsyms without data symbols, no struct bpf_ksym or bpf_prog_aux layout, btflayout.ErrNoBTF),
// a *memory.FaultError (the list head cannot be read), or
// memory.ErrUnknownTarget (opt.Target incomplete). Otherwise entries
// that could not be read are reported by the returned error, which joins
// *EntryError and *WalkError values, and by Set.Err.
func LoadBPF(kmem memory.Reader, syms Symbols, opt Options) (*Set, error) {
	ld, err := newLoader(kmem, syms, opt)
	if err != nil {
		return nil, err
	}
	head, err := ld.locate(headSpec{sym: "bpf_kallsyms", in: []string{"bpf_get_kallsym", "bpf_ksym_add"}, why: "a kernel without CONFIG_BPF_JIT", empty: ld.empty}, ld.bpfHead)
	if err != nil {
		if _, ok := ld.syms(dataWitness); ok {
			// The symbol table has data symbols (KALLSYMS_ALL), so the
			// list head's absence is the kernel's: built without
			// CONFIG_BPF_JIT, it has no BPF symbols to list.
			return newSet(FinderBPF, nil, nil), nil
		}
		if ld.code != nil && ld.code.Func != nil {
			_, _, printer := ld.code.Func("bpf_get_kallsym")
			_, _, text := ld.code.Func(textWitness)
			if !printer && text {
				// Text symbols but not the function that prints BPF
				// symbols: a kernel without CONFIG_BPF_JIT (or older
				// than v4.11), whose /proc/kallsyms has no BPF lines.
				return newSet(FinderBPF, nil, nil), nil
			}
		}
		return nil, err
	}
	b := symfinder.NewBuilder(FinderBPF, ModuleBPF)
	if empty, err := ld.empty(head); err != nil {
		return nil, err
	} else if empty {
		// Nothing to read, so no struct layouts needed.
	} else if _, err := ld.src.Struct("bpf_ksym", "start", "end", "name", "lnode"); err == nil {
		err = ld.bpfKsyms(head, b)
		if err != nil {
			return nil, err
		}
	} else if _, err2 := ld.src.Struct("bpf_prog_aux", "ksym_lnode", "prog"); err2 == nil {
		if err := ld.bpfProgAux(head, b); err != nil {
			return nil, err
		}
	} else {
		return nil, fmt.Errorf("bpfsyms: %s has neither struct bpf_ksym (v5.7+) nor bpf_prog_aux.ksym_lnode (v4.11–v5.6): %w (%w)", ld.src.Describe(), err, ErrMissingInfo)
	}
	ix, err := b.Build()
	if err != nil {
		return nil, err
	}
	return ld.set(FinderBPF, []group{{ix: ix}})
}

// set returns the set of what the load read, with its errors.
func (ld *loader) set(name string, groups []group) (*Set, error) {
	s := newSet(name, groups, ld.errs)
	s.heads = ld.heads
	return s, s.err
}

// bpfHead validates a candidate bpf_kallsyms: a list whose ends agree, and
// whose first and last entries are struct bpf_ksym with a "bpf_" name and
// a sane range (v5.7+ layouts; before, the list alone).
func (ld *loader) bpfHead(c uint64) error {
	ks, read, err := ld.structOf("bpf_ksym", "start", "end", "name", "lnode")
	if err != nil {
		if _, err2 := ld.src.Struct("bpf_prog_aux", "ksym_lnode", "prog"); err2 == nil {
			return ld.ring(c, nil)
		}
		// Without a layout only an empty list can be recognised.
		return ld.ring(c, func(uint64) error { return err })
	}
	start, end, name, lnode := ld.field(ks, "start"), ld.field(ks, "end"), ld.field(ks, "name"), ld.field(ks, "lnode")
	return ld.ring(c, func(n uint64) error {
		a, err := container(n, lnode.off)
		if err != nil {
			return err
		}
		buf, err := ld.read(a, read)
		if err != nil {
			return err
		}
		nm, ok := cstr(buf[name.off:min(name.off+name.size, uint64(len(buf)))])
		if !ok || !strings.HasPrefix(string(nm), "bpf_") {
			return corrupt("struct bpf_ksym at %#x: name %q is no BPF symbol's", a, nm)
		}
		return checkRange(ld.uint(buf, start), ld.uint(buf, end))
	})
}

// bpfKsyms walks struct bpf_ksym entries (v5.7+) linked through lnode.
func (ld *loader) bpfKsyms(head uint64, b *symfinder.Builder) error {
	ks, read, err := ld.structOf("bpf_ksym", "start", "end", "name", "lnode")
	if err != nil {
		return err
	}
	start, end, name, lnode := ld.field(ks, "start"), ld.field(ks, "end"), ld.field(ks, "name"), ld.field(ks, "lnode")
	if name.size == 0 || name.size > maxNameLen {
		return missing("%s: bpf_ksym.name of %d bytes", ld.src.Describe(), name.size)
	}
	next := fld{off: lnode.off + ld.next, size: ld.ptr, ok: true}
	read = max(read, next.off+next.size)
	buf := make([]byte, read)
	return ld.walk("bpf_kallsyms", head, func(node uint64) (uint64, error) {
		addr, err := container(node, lnode.off)
		if err != nil {
			return 0, err
		}
		if err := memory.ReadFull(ld.kmem, buf, addr); err != nil {
			return 0, fmt.Errorf("struct bpf_ksym at %#x: %w", addr, err)
		}
		s, e := ld.uint(buf, start), ld.uint(buf, end)
		nm, ok := cstr(buf[name.off : name.off+name.size])
		switch {
		case !ok:
			ld.entryErr("bpf_kallsyms", addr, corrupt("name without NUL in %d bytes", name.size))
		case checkRange(s, e) != nil:
			ld.entryErr("bpf_kallsyms", addr, fmt.Errorf("%q: %w", nm, checkRange(s, e)))
		case len(nm) > 0: // /proc/kallsyms skips empty names
			b.AddSized(s, e-s, bpfSymType, nm)
		}
		return ld.uint(buf, next), nil
	})
}

// auxLayout holds what the pre-v5.7 walk reads.
type auxLayout struct {
	auxRead, progRead                   uint64
	lnode, prog, name                   fld
	funcInfo, funcInfoCnt, funcIdx, btf fld
	tag, bpfFunc                        fld
	hdrPages                            fld
	btfRead                             uint64
	btfTypes, btfStrings, btfNrTypes    fld
	fiSize, fiTypeID                    uint64
}

// bpfProgAux walks struct bpf_prog_aux entries (v4.11–v5.6) linked
// through ksym_lnode, computing names and ranges as the kernel did.
func (ld *loader) bpfProgAux(head uint64, b *symfinder.Builder) error {
	aux, auxRead, err := ld.structOf("bpf_prog_aux", "ksym_lnode", "prog")
	if err != nil {
		return err
	}
	prog, progRead, err := ld.structOf("bpf_prog", "tag", "bpf_func")
	if err != nil {
		return err
	}
	hdr, _, err := ld.structOf("bpf_binary_header", "pages")
	if err != nil {
		return err
	}
	l := auxLayout{
		lnode: ld.field(aux, "ksym_lnode"), prog: ld.field(aux, "prog"), name: ld.field(aux, "name"),
		funcInfo: ld.field(aux, "func_info"), funcInfoCnt: ld.field(aux, "func_info_cnt"), funcIdx: ld.field(aux, "func_idx"),
		btf: ld.field(aux, "btf"), tag: ld.field(prog, "tag"), bpfFunc: ld.field(prog, "bpf_func"),
		hdrPages: ld.field(hdr, "pages"), progRead: progRead, fiSize: 8, fiTypeID: 4,
	}
	if l.tag.size == 0 || l.tag.size > 64 || (l.name.ok && l.name.size > maxNameLen) {
		return missing("%s: bpf_prog.tag of %d bytes, bpf_prog_aux.name of %d", ld.src.Describe(), l.tag.size, l.name.size)
	}
	for _, f := range []fld{l.name, l.funcInfo, l.funcInfoCnt, l.funcIdx, l.btf} {
		if f.ok {
			auxRead = max(auxRead, f.off+f.size)
		}
	}
	auxRead = max(auxRead, l.lnode.off+ld.next+ld.ptr)
	if auxRead > maxStruct {
		return missing("%s: struct bpf_prog_aux of %d bytes", ld.src.Describe(), auxRead)
	}
	l.auxRead = auxRead
	if bt, read, err := ld.structOf("btf", "types", "strings"); err == nil {
		l.btfTypes, l.btfStrings, l.btfNrTypes = ld.field(bt, "types"), ld.field(bt, "strings"), ld.field(bt, "nr_types")
		if l.btfNrTypes.ok {
			read = max(read, l.btfNrTypes.off+l.btfNrTypes.size)
		}
		l.btfRead = read
	}
	if fi, err := ld.src.Struct("bpf_func_info", "type_id"); err == nil && fi.Size > 0 && fi.Size <= 64 {
		l.fiSize, l.fiTypeID = fi.Size, ld.field(fi, "type_id").off
	}
	return ld.walk("bpf_kallsyms", head, func(node uint64) (uint64, error) {
		a, err := container(node, l.lnode.off)
		if err != nil {
			return 0, err
		}
		buf, err := ld.read(a, l.auxRead)
		if err != nil {
			return 0, fmt.Errorf("struct bpf_prog_aux at %#x: %w", a, err)
		}
		next := ld.uint(buf, fld{off: l.lnode.off + ld.next, size: ld.ptr, ok: true})
		if err := ld.progSym(&l, buf, b); err != nil {
			ld.entryErr("bpf_kallsyms", a, err)
		}
		return next, nil
	})
}

// progSym adds the symbol of one pre-v5.7 program.
func (ld *loader) progSym(l *auxLayout, aux []byte, b *symfinder.Builder) error {
	p := ld.uint(aux, l.prog)
	pb, err := ld.read(p, l.progRead)
	if err != nil {
		return fmt.Errorf("struct bpf_prog at %#x: %w", p, err)
	}
	start := ld.uint(pb, l.bpfFunc)
	hdr := start &^ (ld.page - 1)
	pages, err := memory.Uint32(ld.kmem, ld.bo, hdr+l.hdrPages.off)
	if err != nil {
		return fmt.Errorf("bpf_binary_header at %#x: %w", hdr, err)
	}
	end := hdr + uint64(pages)*ld.page
	if end < hdr {
		return corrupt("bpf_binary_header at %#x: %d pages wrap the address space", hdr, pages)
	}
	if err := checkRange(start, end); err != nil {
		return err
	}
	name := make([]byte, 0, oldKsymNameLen)
	name = append(name, "bpf_prog_"...)
	name = hex.AppendEncode(name, pb[l.tag.off:l.tag.off+l.tag.size])
	var suffix []byte
	var nameErr error
	if ld.uint(aux, l.funcInfoCnt) > 0 {
		var fn string
		if fn, nameErr = ld.btfFuncName(l, aux); nameErr == nil {
			suffix = []byte(fn)
		}
	}
	if suffix == nil && l.name.ok {
		n, ok := cstr(aux[l.name.off : l.name.off+l.name.size])
		if !ok {
			return corrupt("bpf_prog_aux.name without NUL in %d bytes", l.name.size)
		}
		suffix = n
	}
	if len(suffix) > 0 {
		name = append(append(name, '_'), suffix...)
	}
	name = name[:min(len(name), oldKsymNameLen-1)]
	b.AddSized(start, end-start, bpfSymType, name)
	if nameErr != nil {
		// The symbol is kept under aux->name; say why the BTF name is not used.
		return fmt.Errorf("%s: BTF function name: %w", name, nameErr)
	}
	return nil
}

// btfFuncName reads the name of the program's function from its BTF:
// btf->strings + btf->types[func_info[func_idx].type_id]->name_off.
func (ld *loader) btfFuncName(l *auxLayout, aux []byte) (string, error) {
	if !l.funcInfo.ok || !l.btf.ok || l.btfRead == 0 {
		return "", missing("%s: no layout for struct btf / bpf_prog_aux.func_info", ld.src.Describe())
	}
	cnt, idx := ld.uint(aux, l.funcInfoCnt), ld.uint(aux, l.funcIdx)
	if idx >= cnt {
		return "", corrupt("func_idx %d of %d", idx, cnt)
	}
	typeID, err := memory.Uint32(ld.kmem, ld.bo, ld.uint(aux, l.funcInfo)+idx*l.fiSize+l.fiTypeID)
	if err != nil {
		return "", err
	}
	bt, err := ld.read(ld.uint(aux, l.btf), l.btfRead)
	if err != nil {
		return "", err
	}
	if l.btfNrTypes.ok && uint64(typeID) > ld.uint(bt, l.btfNrTypes) {
		return "", corrupt("type id %d beyond nr_types %d", typeID, ld.uint(bt, l.btfNrTypes))
	}
	t, err := ld.pointer(ld.uint(bt, l.btfTypes) + uint64(typeID)*ld.ptr)
	if err != nil {
		return "", err
	}
	off, err := memory.Uint32(ld.kmem, ld.bo, t) // btf_type.name_off
	if err != nil {
		return "", err
	}
	return memory.CString(ld.kmem, ld.uint(bt, l.btfStrings)+uint64(off), oldKsymNameLen)
}
