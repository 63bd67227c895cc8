package vmcore

import (
	"fmt"

	"github.com/kdumpsyms/kdumpsyms/internal/vtop"
	"github.com/kdumpsyms/kdumpsyms/memory"
	"github.com/kdumpsyms/kdumpsyms/vmcoreinfo"
)

// Kernel returns a reader over kernel virtual memory, built on first use
// from VMCOREINFO and physical memory by package vtop (page tables, the
// direct map and the kernel text map of the architecture). The container's
// own virtual map (an ELF core's p_vaddr), if any, serves addresses the
// translation cannot.
//
// The reader is not safe for concurrent use. Errors wrap
// errors.ErrUnsupported for architectures vtop does not translate and
// vmcoreinfo.ErrMissingInfo when VMCOREINFO is absent or lacks what the
// architecture needs, and also memory.ErrUnknownTarget when the
// architecture is unknown (name it: Options.Arch); they are returned again
// on every call.
func (d *Dump) Kernel() (memory.Reader, error) {
	t, err := d.Translator()
	if err != nil {
		return nil, err
	}
	return t, nil
}

// Translator is Kernel with the translator's full interface: Translate,
// Layout and Stats.
func (d *Dump) Translator() (vtop.Translator, error) {
	d.kernelMu.Lock()
	defer d.kernelMu.Unlock()
	if !d.kernelSet && d.info == nil && d.deriveErr != nil {
		d.kernelErr = fmt.Errorf("vmcore: kernel address space: %w: %w", d.deriveErr, vmcoreinfo.ErrMissingInfo)
		d.kernelSet = true
	}
	if !d.kernelSet && d.arch.Name == "" {
		d.kernelErr = memory.WithRemedy(fmt.Errorf("vmcore: kernel address space: %w: the %s container does not record the architecture and VMCOREINFO has no line only one architecture writes (i386 writes none): %w", memory.ErrUnknownTarget, d.format, vmcoreinfo.ErrMissingInfo), memory.SupplyArch)
		d.kernelSet = true
	}
	if !d.kernelSet {
		d.kernel, d.kernelErr = vtop.New(vtop.Config{
			Arch:     d.arch.Name,
			Target:   d.arch.Target,
			Info:     d.info,
			Phys:     d.phys,
			Virtual:  d.be.virtual(),
			PhysBase: d.be.physBase(),
			// 32-bit ARM's PHYS_OFFSET candidates
			PhysRanges: d.be.ranges,
		})
		if d.kernelErr != nil {
			d.kernelErr = fmt.Errorf("vmcore: kernel address space: %w", d.kernelErr)
		}
		d.kernelSet = true
	}
	return d.kernel, d.kernelErr
}
