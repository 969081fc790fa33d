// SPDX-License-Identifier: MIT
// The runtime's RPC over Engine.IO v4 / Socket.IO v5 on one WebSocket (ARCHITECTURE.md, "Wire
// protocol"): namespace /rpc, the token in CONNECT's auth, every event one binary attachment
// holding a msgpack map. Only what the page needs: calls of any shape, their inbox, cancel.
import { encode, decode } from './msgpack.js';

const NAMESPACE = '/rpc';
const TERMINAL = new Set(['call:result', 'call:end', 'call:error']);

let counter = 0;
function newCallId() {
    const random = Array.from(crypto.getRandomValues(new Uint8Array(8)), (b) => b.toString(16).padStart(2, '0'));
    return 'cockpit-' + random.join('') + '-' + (++counter);
}

export class RuntimeSocket {
    // ws: an object with send(string | Uint8Array), close(reason), and the onopen/onmessage/
    // onclose properties (StreamWebSocket, or a browser WebSocket wrapped alike).
    constructor(ws, token) {
        this.ws = ws;
        this.token = token;
        this.calls = new Map(); // call_id -> { onItem, onResult, onEnd, onError }
        this.pending = null; // { event, expected, buffers, fields } while attachments arrive
        this.connected = new Promise((resolve, reject) => {
            this.resolveConnected = resolve;
            this.rejectConnected = reject;
        });
        this.onclose = null;
        ws.onmessage = (m) => this.receive(m);
        ws.onclose = (reason) => this.closed(reason);
    }

    close() {
        this.ws.close('closed by the page');
    }

    closed(reason) {
        this.rejectConnected(new Error(reason));
        for (const [, handlers] of this.calls)
            handlers.onError({ type: 'ConnectionError', message: reason });
        this.calls.clear();
        if (this.onclose)
            this.onclose(reason);
    }

    receive(message) {
        if (typeof message !== 'string') {
            this.attachment(message);
            return;
        }
        switch (message[0]) {
        case '0': // Engine.IO open: connect to the namespace with the token
            this.ws.send('40' + NAMESPACE + ',' + JSON.stringify({ token: this.token }));
            break;
        case '2': // ping
            this.ws.send('3');
            break;
        case '1': // the server closes
            this.ws.close('the runtime closed the session');
            break;
        case '4':
            this.socketPacket(message.slice(1));
            break;
        default:
            break;
        }
    }

    // A Socket.IO packet: TYPE [ATTACHMENTS-] [/NSP,] [ID] JSON
    socketPacket(p) {
        const type = p[0];
        let rest = p.slice(1);
        let attachments = 0;
        const dash = rest.match(/^(\d+)-/);
        if (dash) {
            attachments = Number(dash[1]);
            rest = rest.slice(dash[0].length);
        }
        if (rest.startsWith(NAMESPACE + ','))
            rest = rest.slice(NAMESPACE.length + 1);
        else if (rest.startsWith('/'))
            return; // another namespace: not ours
        const payload = rest.length ? JSON.parse(rest) : null;
        if (type === '0') {
            this.resolveConnected();
        } else if (type === '4') {
            const why = payload && payload.message ? payload.message : 'refused';
            this.ws.close('the runtime refused the connection: ' + why);
        } else if ((type === '2' || type === '5') && Array.isArray(payload)) {
            if (attachments > 0)
                this.pending = { event: payload[0], args: payload.slice(1), buffers: [], expected: attachments };
            else
                this.event(payload[0], payload[1]);
        }
    }

    attachment(u8) {
        if (!this.pending)
            return;
        this.pending.buffers.push(u8);
        if (this.pending.buffers.length < this.pending.expected)
            return;
        const { event, args, buffers } = this.pending;
        this.pending = null;
        const arg = args[0];
        if (arg && arg._placeholder === true && Number.isInteger(arg.num) && buffers[arg.num])
            this.event(event, decode(buffers[arg.num]));
    }

    event(name, msg) {
        if (!msg || typeof msg.call_id !== 'string')
            return;
        const handlers = this.calls.get(msg.call_id);
        if (!handlers)
            return;
        if (TERMINAL.has(name)) {
            this.calls.delete(msg.call_id);
            this.emit('ack', { call_id: msg.call_id });
        }
        if (name === 'call:item')
            handlers.onItem(msg.value);
        else if (name === 'call:result')
            handlers.onResult(msg.value);
        else if (name === 'call:end')
            handlers.onEnd();
        else if (name === 'call:error')
            handlers.onError(msg.error || { type: 'Error', message: 'the call failed' });
    }

    // An event with one binary attachment: the msgpack map. Once the connection is gone there
    // is no one to tell: every call has had its error (closed()), so nothing is sent.
    emit(name, map) {
        if (!this.ws.open)
            return;
        this.ws.send('451-' + NAMESPACE + ',' + JSON.stringify([name, { _placeholder: true, num: 0 }]));
        this.ws.send(encode(map));
    }

    // handlers: { onItem(value), onResult(value), onEnd(), onError({type, message}) }.
    call(callable, shape, kwargs, handlers) {
        const id = newCallId();
        const noop = () => {};
        this.calls.set(id, { onItem: noop, onResult: noop, onEnd: noop, onError: noop, ...handlers });
        this.emit('call', { call_id: id, callable, shape, args: [], kwargs });
        return id;
    }

    sendIn(id, item) {
        this.emit('call:in', { call_id: id, item });
    }

    endIn(id) {
        this.emit('call:end_in', { call_id: id });
    }

    cancel(id) {
        this.emit('cancel', { call_id: id });
    }
}
