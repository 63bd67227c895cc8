module github.com/kdumpsyms/kdumpsyms/testdata/vmcores

go 1.26
