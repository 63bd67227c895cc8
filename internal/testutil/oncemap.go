package testutil

import "sync"

// OnceMap computes a value at most once per key in a test process and
// hands the same value (and error) to every later caller: tests that share
// an expensive result (a decoded dump, converted images) ask for it by
// key. It is safe for concurrent use; the zero value is ready.
type OnceMap[K comparable, V any] struct {
	mu sync.Mutex
	m  map[K]*onceEntry[V]
}

type onceEntry[V any] struct {
	once sync.Once
	v    V
	err  error
}

// Get returns the value of key k, calling f to compute it the first time.
// Concurrent first callers wait for the one computing it.
func (o *OnceMap[K, V]) Get(k K, f func() (V, error)) (V, error) {
	o.mu.Lock()
	if o.m == nil {
		o.m = map[K]*onceEntry[V]{}
	}
	e := o.m[k]
	if e == nil {
		e = new(onceEntry[V])
		o.m[k] = e
	}
	o.mu.Unlock()
	e.once.Do(func() { e.v, e.err = f() })
	return e.v, e.err
}

// Drain calls f with every value computed without error and forgets them
// all, for a TestMain to release what the tests shared.
func (o *OnceMap[K, V]) Drain(f func(V)) {
	o.mu.Lock()
	m := o.m
	o.m = nil
	o.mu.Unlock()
	for _, e := range m {
		e.once.Do(func() {}) // wait for one still being computed
		if e.err == nil {
			f(e.v)
		}
	}
}
