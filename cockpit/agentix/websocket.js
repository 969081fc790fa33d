// SPDX-License-Identifier: MIT
// A WebSocket client (RFC 6455) over a byte stream the page is given: in Cockpit, a "stream"
// channel the bridge opens to the runtime from the host, since the browser cannot reach the
// runtime's address itself. Cockpit's own websocket-stream1 channel cannot be used: it sends
// every frame of a channel as text or every frame as binary, and Socket.IO mixes the two.
//
// The stream: { send(Uint8Array), close(), onData = (Uint8Array) => …, onClose = (reason) => … }.

const GUID = '258EAFA5-E914-47DA-95CA-C5AB0DC85B11';
const MAX_HEAD = 16384;
const MAX_MESSAGE = 64 * 1024 * 1024; // the runtime's own bound on a message is below this

const encoder = new TextEncoder();
const decoder = new TextDecoder('utf-8', { fatal: false });

function base64(u8) {
    let s = '';
    for (const b of u8)
        s += String.fromCharCode(b);
    return btoa(s);
}

function concat(a, b) {
    if (a.length === 0)
        return b;
    const out = new Uint8Array(a.length + b.length);
    out.set(a);
    out.set(b, a.length);
    return out;
}

async function expectedAccept(key) {
    const digest = await crypto.subtle.digest('SHA-1', encoder.encode(key + GUID));
    return base64(new Uint8Array(digest));
}

export class StreamWebSocket {
    // host: the Host header (ADDRESS:PORT); path: the request target.
    constructor(stream, { host, path }) {
        this.stream = stream;
        this.onopen = null;
        this.onmessage = null; // (string | Uint8Array)
        this.onclose = null; // (reason: string)
        this.open = false;
        this.closed = false;
        this.input = new Uint8Array(0);
        this.fragments = null; // { opcode, parts, size } while a fragmented message arrives
        this.key = base64(crypto.getRandomValues(new Uint8Array(16)));

        stream.onData = (u8) => this.receive(u8);
        stream.onClose = (reason) => this.finish(reason || 'the connection to the runtime closed');
        stream.send(encoder.encode(`GET ${path} HTTP/1.1\r\nHost: ${host}\r\nUpgrade: websocket\r\n` +
                                   'Connection: Upgrade\r\nSec-WebSocket-Version: 13\r\n' +
                                   `Sec-WebSocket-Key: ${this.key}\r\n\r\n`));
    }

    send(data) {
        if (!this.open)
            throw new Error('the WebSocket is not open');
        this.sendFrame(typeof data === 'string' ? 1 : 2, typeof data === 'string' ? encoder.encode(data) : data);
    }

    close(reason) {
        if (this.open) {
            try {
                this.sendFrame(8, new Uint8Array([0x03, 0xe8])); // 1000: normal closure
            } catch (e) { /* the stream is gone already */ }
        }
        this.finish(reason || 'closed');
    }

    finish(reason) {
        if (this.closed)
            return;
        this.closed = true;
        this.open = false;
        try {
            this.stream.close();
        } catch (e) { /* closed already */ }
        if (this.onclose)
            this.onclose(reason);
    }

    // A client masks every frame it sends (RFC 6455 5.3).
    sendFrame(opcode, payload) {
        const n = payload.length;
        const head = n < 126 ? 2 : n < 0x10000 ? 4 : 10;
        const frame = new Uint8Array(head + 4 + n);
        const view = new DataView(frame.buffer);
        frame[0] = 0x80 | opcode;
        if (n < 126) {
            frame[1] = 0x80 | n;
        } else if (n < 0x10000) {
            frame[1] = 0x80 | 126;
            view.setUint16(2, n);
        } else {
            frame[1] = 0x80 | 127;
            view.setBigUint64(2, BigInt(n));
        }
        const mask = crypto.getRandomValues(new Uint8Array(4));
        frame.set(mask, head);
        for (let i = 0; i < n; i++)
            frame[head + 4 + i] = payload[i] ^ mask[i & 3];
        this.stream.send(frame);
    }

    receive(u8) {
        if (this.closed)
            return;
        this.input = concat(this.input, u8);
        try {
            if (this.checking && !this.open)
                return; // the upgrade's answer is being checked; frames wait for it
            if (!this.open && !this.readHandshake())
                return;
            while (this.open && this.readFrame())
                ;
        } catch (e) {
            this.close(e.message);
        }
    }

    readHandshake() {
        let end = -1;
        for (let i = 3; i < this.input.length; i++) {
            if (this.input[i - 3] === 13 && this.input[i - 2] === 10 && this.input[i - 1] === 13 && this.input[i] === 10) {
                end = i + 1;
                break;
            }
        }
        if (end < 0) {
            if (this.input.length > MAX_HEAD)
                throw new Error('the runtime sent a response head of more than ' + MAX_HEAD + ' bytes');
            return false;
        }
        const lines = decoder.decode(this.input.subarray(0, end)).split('\r\n');
        this.input = this.input.slice(end);
        const status = lines[0].split(' ');
        if (status[1] !== '101')
            throw new Error('the runtime answered the WebSocket upgrade with ' + lines[0].slice(9));
        const headers = {};
        for (const line of lines.slice(1)) {
            const colon = line.indexOf(':');
            if (colon > 0)
                headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
        }
        // The check is asynchronous (WebCrypto); frames that come meanwhile wait in this.input.
        this.checking = true;
        expectedAccept(this.key).then((accept) => {
            if (headers['sec-websocket-accept'] !== accept) {
                this.close('the runtime answered the WebSocket upgrade with a wrong Sec-WebSocket-Accept');
                return;
            }
            this.open = true;
            if (this.onopen)
                this.onopen();
            this.receive(new Uint8Array(0));
        }, (e) => this.close('cannot check the WebSocket upgrade: ' + e.message));
        return false;
    }

    // One frame from this.input, if it is all there; false when more bytes are needed.
    readFrame() {
        const b = this.input;
        if (b.length < 2)
            return false;
        const fin = (b[0] & 0x80) !== 0;
        const opcode = b[0] & 0x0f;
        if (b[1] & 0x80)
            throw new Error('the runtime sent a masked frame');
        let n = b[1] & 0x7f;
        let head = 2;
        const view = new DataView(b.buffer, b.byteOffset, b.byteLength);
        if (n === 126) {
            if (b.length < 4)
                return false;
            n = view.getUint16(2);
            head = 4;
        } else if (n === 127) {
            if (b.length < 10)
                return false;
            n = Number(view.getBigUint64(2));
            head = 10;
        }
        if (n > MAX_MESSAGE)
            throw new Error('the runtime sent a frame of ' + n + ' bytes');
        if (b.length < head + n)
            return false;
        const payload = b.slice(head, head + n);
        this.input = b.slice(head + n);

        if (opcode === 8) {
            const code = n >= 2 ? new DataView(payload.buffer).getUint16(0) : 1005;
            this.close('the runtime closed the WebSocket (' + code + (n > 2 ? ': ' + decoder.decode(payload.subarray(2)) : '') + ')');
            return false;
        }
        if (opcode === 9) {
            this.sendFrame(10, payload);
            return true;
        }
        if (opcode === 10)
            return true;
        if (opcode === 0) {
            if (!this.fragments)
                throw new Error('the runtime sent a continuation frame with no message to continue');
            this.fragments.parts.push(payload);
            this.fragments.size += n;
        } else if (opcode === 1 || opcode === 2) {
            if (this.fragments)
                throw new Error('the runtime started a message inside another');
            this.fragments = { opcode, parts: [payload], size: n };
        } else {
            throw new Error('the runtime sent a frame of unknown opcode ' + opcode);
        }
        if (this.fragments.size > MAX_MESSAGE)
            throw new Error('the runtime sent a message of more than ' + MAX_MESSAGE + ' bytes');
        if (!fin)
            return true;
        const { opcode: kind, parts, size } = this.fragments;
        this.fragments = null;
        let message = parts[0];
        if (parts.length > 1) {
            message = new Uint8Array(size);
            let at = 0;
            for (const p of parts) {
                message.set(p, at);
                at += p.length;
            }
        }
        if (this.onmessage)
            this.onmessage(kind === 1 ? decoder.decode(message) : message);
        return true;
    }
}
