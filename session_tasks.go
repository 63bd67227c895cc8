package kdumpsyms

import (
	"fmt"

	"github.com/kdumpsyms/kdumpsyms/modsyms"
	"github.com/kdumpsyms/kdumpsyms/tasks"
)

// Tasks lists the dump's tasks (see tasks.Read), once: the idle task of
// each CPU, every thread group and its threads, with struct layouts from
// the session's layout source (the dump's BTF, or Options.Layout). The
// error is one that left nothing listed (no layout with task_struct, no
// init_task); the list's Problems say what could not be read.
func (s *Session) Tasks() (*tasks.List, error) {
	return s.tasksOnce()
}

func (s *Session) listTasks() (*tasks.List, error) {
	kmem, err := s.Kernel()
	if err != nil {
		return nil, fmt.Errorf("kdumpsyms: tasks: %w", err)
	}
	k, err := s.Kallsyms()
	if err != nil {
		return nil, fmt.Errorf("kdumpsyms: tasks: %w", err)
	}
	src, err := s.layout()
	if err != nil {
		return nil, fmt.Errorf("kdumpsyms: tasks: %w", err)
	}
	l, err := tasks.NewLayout(src)
	if err != nil {
		return nil, fmt.Errorf("kdumpsyms: %w", err)
	}
	return tasks.Read(kmem, tasks.Options{
		Target: s.target(),
		Layout: l,
		Symbol: modsyms.FromFinder(k.Finder()),
	})
}
