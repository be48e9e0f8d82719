//! Pickle opcodes (CPython's `Lib/pickle.py` names), the binary ones of
//! protocols 2 to 5 that this crate reads or writes.

/// `\x80 n`: protocol version.
pub const PROTO: u8 = 0x80;
/// `\x95 u64`: framing hint of protocol 4 (skipped).
pub const FRAME: u8 = 0x95;
/// `.`: end of the pickle; the top of the stack is the result.
pub const STOP: u8 = b'.';
/// `(`: push a mark.
pub const MARK: u8 = b'(';
/// `0`: discard the top of the stack.
pub const POP: u8 = b'0';
/// `1`: discard everything down to the topmost mark.
pub const POP_MARK: u8 = b'1';
/// `2`: duplicate the top of the stack.
pub const DUP: u8 = b'2';
/// `N`: push `None`.
pub const NONE: u8 = b'N';
/// `\x88`: push `True`.
pub const NEWTRUE: u8 = 0x88;
/// `\x89`: push `False`.
pub const NEWFALSE: u8 = 0x89;
/// `J i32`: push a signed 4-byte integer.
pub const BININT: u8 = b'J';
/// `K u8`: push a 1-byte unsigned integer.
pub const BININT1: u8 = b'K';
/// `M u16`: push a 2-byte unsigned integer.
pub const BININT2: u8 = b'M';
/// `\x8a n bytes`: push a little-endian two's-complement integer of n bytes.
pub const LONG1: u8 = 0x8a;
/// `\x8b u32 bytes`: as LONG1 with a 4-byte length.
pub const LONG4: u8 = 0x8b;
/// `G f64`: push a big-endian double.
pub const BINFLOAT: u8 = b'G';
/// `\x8c u8 utf8`: push a short string.
pub const SHORT_BINUNICODE: u8 = 0x8c;
/// `X u32 utf8`: push a string.
pub const BINUNICODE: u8 = b'X';
/// `\x8d u64 utf8`: push a long string.
pub const BINUNICODE8: u8 = 0x8d;
/// `C u8 bytes`: push short bytes (protocol 3).
pub const SHORT_BINBYTES: u8 = b'C';
/// `B u32 bytes`: push bytes (protocol 3).
pub const BINBYTES: u8 = b'B';
/// `\x8e u64 bytes`: push long bytes (protocol 4).
pub const BINBYTES8: u8 = 0x8e;
/// `\x96 u64 bytes`: push a bytearray (protocol 5).
pub const BYTEARRAY8: u8 = 0x96;
/// `]`: push an empty list.
pub const EMPTY_LIST: u8 = b']';
/// `a`: append the top of the stack to the list below it.
pub const APPEND: u8 = b'a';
/// `e`: append everything above the mark to the list below the mark.
pub const APPENDS: u8 = b'e';
/// `l`: build a list of everything above the mark.
pub const LIST: u8 = b'l';
/// `)`: push an empty tuple.
pub const EMPTY_TUPLE: u8 = b')';
/// `t`: build a tuple of everything above the mark.
pub const TUPLE: u8 = b't';
/// `\x85`: build a 1-tuple of the top of the stack.
pub const TUPLE1: u8 = 0x85;
/// `\x86`: build a 2-tuple of the two topmost items.
pub const TUPLE2: u8 = 0x86;
/// `\x87`: build a 3-tuple of the three topmost items.
pub const TUPLE3: u8 = 0x87;
/// `}`: push an empty dict.
pub const EMPTY_DICT: u8 = b'}';
/// `d`: build a dict of the key/value pairs above the mark.
pub const DICT: u8 = b'd';
/// `s`: set one key/value pair in the dict below them.
pub const SETITEM: u8 = b's';
/// `u`: set the key/value pairs above the mark in the dict below the mark.
pub const SETITEMS: u8 = b'u';
/// `\x8f`: push an empty set (protocol 4).
pub const EMPTY_SET: u8 = 0x8f;
/// `\x90`: add the items above the mark to the set below it.
pub const ADDITEMS: u8 = 0x90;
/// `\x91`: build a frozenset of the items above the mark.
pub const FROZENSET: u8 = 0x91;
/// `c module\nname\n`: push a global.
pub const GLOBAL: u8 = b'c';
/// `\x93`: push the global named by the two strings on the stack (protocol 4).
pub const STACK_GLOBAL: u8 = 0x93;
/// `R`: call the callable below the top with the argument tuple on top.
pub const REDUCE: u8 = b'R';
/// `b`: set the state of the object below the top.
pub const BUILD: u8 = b'b';
/// `\x81`: `cls.__new__(cls, *args)`.
pub const NEWOBJ: u8 = 0x81;
/// `\x92`: `cls.__new__(cls, *args, **kwargs)` (protocol 4).
pub const NEWOBJ_EX: u8 = 0x92;
/// `Q`: the top of the stack is a persistent id; replace it by the object.
pub const BINPERSID: u8 = b'Q';
/// `q u8`: store the top of the stack in the memo.
pub const BINPUT: u8 = b'q';
/// `r u32`: as BINPUT with a 4-byte index.
pub const LONG_BINPUT: u8 = b'r';
/// `\x94`: store the top of the stack at the next memo index (protocol 4).
pub const MEMOIZE: u8 = 0x94;
/// `h u8`: push a memo entry.
pub const BINGET: u8 = b'h';
/// `j u32`: as BINGET with a 4-byte index.
pub const LONG_BINGET: u8 = b'j';
