package kallsyms

import "github.com/kdumpsyms/kdumpsyms/memory"

func scan(r memory.Reader, c config, opt Options) (*located, error) {
	return nil, ErrNotFound
}
