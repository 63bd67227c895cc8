module github.com/kdumpsyms/kdumpsyms

go 1.26

require (
	github.com/anchore/go-lzo v0.1.1
	github.com/cilium/ebpf v0.22.0
	github.com/ianlancetaylor/demangle v0.0.0-20260724033716-83e58baca724
	github.com/klauspost/compress v1.20.4
	github.com/stretchr/testify v1.12.1
	github.com/ulikunitz/xz v0.5.17
)

require (
	go.yaml.in/yaml/v3 v3.0.5 // indirect
	golang.org/x/sys v0.43.0
)
