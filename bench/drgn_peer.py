"""The drgn side of bench/drgn-paired: the work of `kdump-syms all`, in drgn.

Usage (under the python that has drgn): drgn_peer.py VMCORE LAYOUT-TABLE

It opens VMCORE with no debug info, loads the core kernel's symbols from the
kallsyms tables in the dump (drgn.helpers.linux.kallsyms.load_vmlinux_kallsyms,
which finds them through VMCOREINFO), then every loaded module's symbols
(load_module_kallsyms, drgn's own walk of the module list and each module's
ELF symbol table), registers both indexes as symbol finders and enumerates
every symbol (Program.symbols(), reading each one's name and address).

drgn reads no BTF, and load_module_kallsyms needs the types of struct module,
struct mod_kallsyms and struct list_head. LAYOUT-TABLE gives their offsets
(bench/drgn-layout writes it from the dump's BTF, once, before the timed
runs): this program turns them into drgn types through a type finder, and
gives drgn the `modules` list head through an object finder. The drgn side
is thus handed its type information for free, where kdump-syms finds and
decodes the BTF within its timed run.

It prints "vmlinux N modules M total T" on stderr, to check the runs did
the whole work.
"""

import re
import sys

from drgn import Object, PlatformFlags, Program, TypeKind, TypeMember
from drgn.helpers.linux.kallsyms import load_module_kallsyms, load_vmlinux_kallsyms

LINE = re.compile(r"^(?:sizeof\((\w+)\)|(\w+)\.(\w+))\s*=\s*([0-9a-fx:]+)\s*(?:#.*)?$")


def read_table(path):
    """Parse a btflayout table: {struct: (size, {field: (offset, size)})}."""
    structs = {}
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith("#") or line.startswith("enum("):
                continue
            m = LINE.match(line)
            if not m:
                raise ValueError(f"{path}: cannot parse {line!r}")
            if m.group(1):
                structs.setdefault(m.group(1), [0, {}])[0] = int(m.group(4), 0)
            else:
                nums = [int(x, 0) for x in m.group(4).split(":")]
                structs.setdefault(m.group(2), [0, {}])[1][m.group(3)] = nums
    return structs


def build_types(prog, table):
    """drgn types for what load_module_kallsyms reads, from the table."""
    is64 = bool(prog.platform.flags & PlatformFlags.IS_64_BIT)
    psize = 8 if is64 else 4
    u8 = prog.int_type("unsigned char", 1, False)
    u16 = prog.int_type("unsigned short", 2, False)
    u32 = prog.int_type("unsigned int", 4, False)
    ulong = prog.int_type("unsigned long", psize, False)
    char = prog.int_type("char", 1, True)
    types = {}

    def ptr(name):
        # Pointee resolved lazily, so list_head can point at itself.
        return lambda: prog.pointer_type(types[name], psize)

    def struct(name, members):
        size, fields = table[name]
        ms = []
        for fname, typ in members:
            if fname in fields:
                ms.append(TypeMember(typ, fname, fields[fname][0] * 8))
        types[name] = prog.struct_type(name, size, ms)

    # The ELF symbol as the ELF ABI fixes it (Elf64_Sym / Elf32_Sym).
    if is64:
        sym = [("st_name", u32, 0), ("st_info", u8, 4), ("st_other", u8, 5), ("st_shndx", u16, 6),
               ("st_value", ulong, 8), ("st_size", ulong, 16)]
        symsize = 24
    else:
        sym = [("st_name", u32, 0), ("st_value", ulong, 4), ("st_size", ulong, 8), ("st_info", u8, 12),
               ("st_other", u8, 13), ("st_shndx", u16, 14)]
        symsize = 16
    types["elf_sym"] = prog.struct_type("elf_sym", symsize, [TypeMember(t, n, o * 8) for n, t, o in sym])
    types["char"] = char
    struct("list_head", [("next", ptr("list_head")), ("prev", ptr("list_head"))])
    ksyms = [("symtab", ptr("elf_sym")), ("num_symtab", u32), ("strtab", ptr("char")), ("typetab", ptr("char"))]
    if "mod_kallsyms" in table:
        struct("mod_kallsyms", ksyms)
    name_len = table["module"][1]["name"][1]
    mod = [("list", types["list_head"]), ("name", prog.array_type(char, name_len)), ("kallsyms", ptr("mod_kallsyms"))]
    struct("module", mod + ksyms[:3])
    return types


def main():
    dump, table_path = sys.argv[1], sys.argv[2]
    table = read_table(table_path)
    prog = Program()
    prog.set_core_dump(dump)

    vmlinux = load_vmlinux_kallsyms(prog)
    prog.register_symbol_finder("vmlinux_kallsyms", vmlinux, enable_index=0)

    types = build_types(prog, table)
    struct_kinds = (TypeKind.STRUCT,)

    def find_type(prog, kinds, name, filename):
        t = types.get(name)
        if t is not None and (t.kind in kinds or t.kind not in struct_kinds):
            return t
        return None

    prog.register_type_finder("bench_layout", find_type, enable_index=0)
    modules = prog.symbol("modules").address

    def find_object(prog, name, flags, filename):
        if name == "modules":
            return Object(prog, types["list_head"], address=modules)
        return None

    prog.register_object_finder("bench_layout", find_object, enable_index=0)

    mods = load_module_kallsyms(prog)
    prog.register_symbol_finder("module_kallsyms", mods, enable_index=1)

    syms = prog.symbols()
    for s in syms:
        s.name
        s.address
    nv = len(vmlinux(prog, None, None, False))
    nm = len(mods(prog, None, None, False))
    print(f"vmlinux {nv} modules {nm} total {len(syms)}", file=sys.stderr)


if __name__ == "__main__":
    main()
