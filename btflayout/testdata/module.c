/* A cut-down struct module for btflayout's DWARF test: anonymous union,
 * bitfields, arrays, pointers and an enum, as vmlinux DWARF has them.
 * Built with: gcc -g -c -O0 -o module.o module.c */
enum mod_mem_type { MOD_TEXT = 0, MOD_DATA, MOD_RODATA, MOD_MEM_NUM_TYPES };
struct list_head { struct list_head *next, *prev; };
struct module_memory { void *base; unsigned int size; };
typedef struct { unsigned int st_name; unsigned long st_value; } Elf64_Sym;
struct mod_kallsyms { Elf64_Sym *symtab; unsigned int num_symtab; char *strtab; char *typetab; };
struct module {
	int state;
	struct list_head list;
	char name[56];
	union { unsigned long anon_a; struct { unsigned int anon_b; unsigned int anon_c; }; };
	unsigned int flag_x : 3, flag_y : 5;
	struct module_memory mem[MOD_MEM_NUM_TYPES];
	struct mod_kallsyms *kallsyms;
	const struct mod_kallsyms core_kallsyms;
};
struct module this_module;
enum mod_mem_type t;
