module github.com/kdumpsyms/kdumpsyms

go 1.26
