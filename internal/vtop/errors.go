package vtop

import "errors"

// ErrNotMapped means the kernel does not map the virtual address: a
// page-table entry on the way is not present or invalid, or the address is
// not canonical. The dump is not broken; the address is not in use.
var ErrNotMapped = errors.New("vtop: address not mapped")

// space is FaultError.Space for every fault this package reports.
const space = "kernel virtual"
