// Package tasks lists a kernel's tasks from its memory alone: every thread
// group on init_task.tasks, every thread of each group (signal_struct's
// thread_head), and the idle task of each CPU (runqueues.idle), with the
// PID, parent, CPU, state letter and comm that /proc/PID/stat shows.
//
// Struct layouts come from a btflayout.Source (the dump's BTF); symbol
// addresses from a lookup function (the dump's kallsyms). The package reads
// kernel virtual memory through a memory.Reader and knows nothing of dump
// formats.
//
// # Security
//
// The lists are hostile input: a list that loops, a pointer outside the
// kernel, a task whose page is not in the dump or a comm that is no name
// cost bounded work (Options.MaxTasks), every task that could be read is
// returned, and the failures are reported once per cause with a count.
package tasks
