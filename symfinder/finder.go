package symfinder

// QueryKind says what a Query asks for.
type QueryKind uint8

const (
	// ByAddr asks for the symbols containing Query.Addr, best first.
	ByAddr QueryKind = iota + 1
	// ByName asks for every symbol named Query.Name, in the source's order.
	ByName
	// All asks for every symbol, in the source's own order (the order
	// /proc/kallsyms prints for kernel sources).
	All
)

func (k QueryKind) String() string {
	switch k {
	case ByAddr:
		return "by address"
	case ByName:
		return "by name"
	case All:
		return "all"
	}
	return "unknown query"
}

// Query is one lookup. Only the field its Kind names is meaningful.
type Query struct {
	Kind QueryKind
	Addr uint64
	Name string
}

// Finder is a source of symbols: kallsyms decoded from a dump, a module's
// symbol table, a System.map file, or anything a caller writes.
//
// Find calls yield for each symbol matching q until yield returns false,
// as drgn's symbol finder callback does; stopping early is how a caller asks
// for one result. Finding nothing is not an error: Find returns nil. An
// error means the source could not be consulted at all (for example a lazy
// source whose tables could not be read), and the Chain reports it.
type Finder interface {
	Name() string
	Find(q Query, yield func(Symbol) bool) error
}

// FinderFunc adapts a function to a Finder.
type FinderFunc struct {
	FinderName string
	Func       func(q Query, yield func(Symbol) bool) error
}

// Name returns f.FinderName.
func (f FinderFunc) Name() string { return f.FinderName }

// Find calls f.Func.
func (f FinderFunc) Find(q Query, yield func(Symbol) bool) error { return f.Func(q, yield) }
