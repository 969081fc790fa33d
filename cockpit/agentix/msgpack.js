// SPDX-License-Identifier: MIT
// MessagePack, the part the runtime's wire protocol uses: nil, booleans, integers, float64,
// strings, binary (Uint8Array), arrays and maps (plain objects with string keys). Written here
// because no JavaScript MessagePack library is packaged in Debian; extension types are refused.

const MAX_DEPTH = 64;
const encoder = new TextEncoder();
const decoder = new TextDecoder('utf-8', { fatal: false });

class Writer {
    constructor() {
        this.buf = new Uint8Array(256);
        this.view = new DataView(this.buf.buffer);
        this.len = 0;
    }

    reserve(n) {
        if (this.len + n <= this.buf.length)
            return;
        let size = this.buf.length * 2;
        while (size < this.len + n)
            size *= 2;
        const bigger = new Uint8Array(size);
        bigger.set(this.buf.subarray(0, this.len));
        this.buf = bigger;
        this.view = new DataView(bigger.buffer);
    }

    byte(b) {
        this.reserve(1);
        this.buf[this.len++] = b;
    }

    bytes(u8) {
        this.reserve(u8.length);
        this.buf.set(u8, this.len);
        this.len += u8.length;
    }

    // A type byte followed by a big-endian number of the width the DataView setter writes.
    typed(type, setter, width, value) {
        this.reserve(1 + width);
        this.buf[this.len] = type;
        this.view[setter](this.len + 1, value);
        this.len += 1 + width;
    }

    result() {
        return this.buf.slice(0, this.len);
    }
}

function writeLength(w, n, fix, fixMax, t8, t16, t32) {
    if (n <= fixMax && fix !== null)
        w.byte(fix | n);
    else if (n < 0x100 && t8 !== null)
        w.typed(t8, 'setUint8', 1, n);
    else if (n < 0x10000)
        w.typed(t16, 'setUint16', 2, n);
    else
        w.typed(t32, 'setUint32', 4, n);
}

function writeInteger(w, n) {
    if (n >= 0) {
        if (n < 0x80)
            w.byte(n);
        else if (n < 0x100)
            w.typed(0xcc, 'setUint8', 1, n);
        else if (n < 0x10000)
            w.typed(0xcd, 'setUint16', 2, n);
        else if (n < 0x100000000)
            w.typed(0xce, 'setUint32', 4, n);
        else
            w.typed(0xcf, 'setBigUint64', 8, BigInt(n));
    } else {
        if (n >= -32)
            w.byte(n & 0xff);
        else if (n >= -0x80)
            w.typed(0xd0, 'setInt8', 1, n);
        else if (n >= -0x8000)
            w.typed(0xd1, 'setInt16', 2, n);
        else if (n >= -0x80000000)
            w.typed(0xd2, 'setInt32', 4, n);
        else
            w.typed(0xd3, 'setBigInt64', 8, BigInt(n));
    }
}

function write(w, value, depth) {
    if (depth > MAX_DEPTH)
        throw new RangeError('msgpack: nested deeper than ' + MAX_DEPTH);
    if (value === null || value === undefined) {
        w.byte(0xc0);
    } else if (value === false || value === true) {
        w.byte(value ? 0xc3 : 0xc2);
    } else if (typeof value === 'number') {
        if (Number.isSafeInteger(value))
            writeInteger(w, value);
        else
            w.typed(0xcb, 'setFloat64', 8, value);
    } else if (typeof value === 'bigint') {
        if (value >= BigInt(Number.MIN_SAFE_INTEGER) && value <= BigInt(Number.MAX_SAFE_INTEGER))
            writeInteger(w, Number(value));
        else if (value >= 0n)
            w.typed(0xcf, 'setBigUint64', 8, value);
        else
            w.typed(0xd3, 'setBigInt64', 8, value);
    } else if (typeof value === 'string') {
        const utf8 = encoder.encode(value);
        writeLength(w, utf8.length, 0xa0, 31, 0xd9, 0xda, 0xdb);
        w.bytes(utf8);
    } else if (value instanceof Uint8Array) {
        writeLength(w, value.length, null, -1, 0xc4, 0xc5, 0xc6);
        w.bytes(value);
    } else if (Array.isArray(value)) {
        writeLength(w, value.length, 0x90, 15, null, 0xdc, 0xdd);
        for (const item of value)
            write(w, item, depth + 1);
    } else if (typeof value === 'object') {
        const entries = Object.entries(value).filter(([, v]) => v !== undefined);
        writeLength(w, entries.length, 0x80, 15, null, 0xde, 0xdf);
        for (const [k, v] of entries) {
            write(w, k, depth + 1);
            write(w, v, depth + 1);
        }
    } else {
        throw new TypeError('msgpack: cannot encode a ' + typeof value);
    }
}

export function encode(value) {
    const w = new Writer();
    write(w, value, 0);
    return w.result();
}

class Reader {
    constructor(u8) {
        this.u8 = u8;
        this.view = new DataView(u8.buffer, u8.byteOffset, u8.byteLength);
        this.pos = 0;
    }

    need(n) {
        if (this.pos + n > this.u8.length)
            throw new RangeError('msgpack: the data ends inside a value');
    }

    number(getter, width) {
        this.need(width);
        const v = this.view[getter](this.pos);
        this.pos += width;
        return typeof v === 'bigint' ? Number(v) : v;
    }

    bytes(n) {
        this.need(n);
        const out = this.u8.slice(this.pos, this.pos + n);
        this.pos += n;
        return out;
    }
}

function readString(r, n) {
    return decoder.decode(r.bytes(n));
}

function readArray(r, n, depth) {
    const out = [];
    for (let i = 0; i < n; i++)
        out.push(read(r, depth + 1));
    return out;
}

function readMap(r, n, depth) {
    const out = {};
    for (let i = 0; i < n; i++) {
        const k = read(r, depth + 1);
        if (typeof k !== 'string' && typeof k !== 'number')
            throw new TypeError('msgpack: a map key that is neither a string nor a number');
        Object.defineProperty(out, String(k), { value: read(r, depth + 1), enumerable: true, writable: true,
                                                configurable: true });
    }
    return out;
}

function read(r, depth) {
    if (depth > MAX_DEPTH)
        throw new RangeError('msgpack: nested deeper than ' + MAX_DEPTH);
    const t = r.number('getUint8', 1);
    if (t < 0x80)
        return t;
    if (t >= 0xe0)
        return t - 0x100;
    if ((t & 0xf0) === 0x80)
        return readMap(r, t & 0x0f, depth);
    if ((t & 0xf0) === 0x90)
        return readArray(r, t & 0x0f, depth);
    if ((t & 0xe0) === 0xa0)
        return readString(r, t & 0x1f);
    switch (t) {
    case 0xc0: return null;
    case 0xc2: return false;
    case 0xc3: return true;
    case 0xc4: return r.bytes(r.number('getUint8', 1));
    case 0xc5: return r.bytes(r.number('getUint16', 2));
    case 0xc6: return r.bytes(r.number('getUint32', 4));
    case 0xca: return r.number('getFloat32', 4);
    case 0xcb: return r.number('getFloat64', 8);
    case 0xcc: return r.number('getUint8', 1);
    case 0xcd: return r.number('getUint16', 2);
    case 0xce: return r.number('getUint32', 4);
    case 0xcf: return r.number('getBigUint64', 8);
    case 0xd0: return r.number('getInt8', 1);
    case 0xd1: return r.number('getInt16', 2);
    case 0xd2: return r.number('getInt32', 4);
    case 0xd3: return r.number('getBigInt64', 8);
    case 0xd9: return readString(r, r.number('getUint8', 1));
    case 0xda: return readString(r, r.number('getUint16', 2));
    case 0xdb: return readString(r, r.number('getUint32', 4));
    case 0xdc: return readArray(r, r.number('getUint16', 2), depth);
    case 0xdd: return readArray(r, r.number('getUint32', 4), depth);
    case 0xde: return readMap(r, r.number('getUint16', 2), depth);
    case 0xdf: return readMap(r, r.number('getUint32', 4), depth);
    default:
        throw new TypeError('msgpack: type 0x' + t.toString(16) + ' is not one the runtime sends');
    }
}

export function decode(u8) {
    const r = new Reader(u8);
    const value = read(r, 0);
    if (r.pos !== u8.length)
        throw new RangeError('msgpack: ' + (u8.length - r.pos) + ' bytes after the value');
    return value;
}
