// SPDX-License-Identifier: MIT
// A terminal into a sandbox: the runtime's sandbox::exec as a bidi call with a PTY, over the
// runtime's WebSocket (GetRuntimeAccess gives its URL and token), shown in xterm.js. The bridge
// opens the TCP (or TLS, verified against agentd's RuntimeCA) connection from the host: the
// runtime's address is one only the host reaches.
/* global cockpit, AgentixXterm */
import { StreamWebSocket } from './websocket.js';
import { RuntimeSocket } from './runtime-socket.js';

// The image's bash when it has one, else its sh (busybox images have only that).
const SHELL = 'if command -v bash >/dev/null 2>&1; then exec bash -il; else exec sh -i; fi';

const encoder = new TextEncoder();

// A byte stream to ADDRESS:PORT of url, opened by the bridge (see websocket.js).
export function openRuntimeStream(url, ca) {
    const u = new URL(url);
    const https = u.protocol === 'https:';
    const options = {
        payload: 'stream',
        address: u.hostname.replace(/^\[(.*)\]$/, '$1'),
        port: Number(u.port || (https ? 443 : 80)),
        binary: true,
    };
    if (https)
        options.tls = { authority: { data: ca }, validate: true };
    const channel = cockpit.channel(options);
    const stream = { onData: null, onClose: null };
    stream.send = (u8) => channel.send(u8);
    stream.close = () => channel.close();
    channel.addEventListener('message', (event, data) => stream.onData && stream.onData(data));
    channel.addEventListener('close', (event, options) => {
        const why = options.problem ? 'cannot reach the runtime at ' + u.host + ': ' + (options.message || cockpit.message(options)) : null;
        if (stream.onClose)
            stream.onClose(why);
    });
    return stream;
}

export class SandboxTerminal {
    // element: where xterm draws; status(text): where the page says what happens.
    constructor(element, status) {
        this.element = element;
        this.status = status;
        this.rpc = null;
        this.term = null;
        this.callId = null;
        this.decoder = new TextDecoder('utf-8');
    }

    async open(agentd, id) {
        this.status('Connecting to the runtime…');
        const { url, token } = await agentd.runtimeAccess(id);
        const ca = url.startsWith('https:') ? (await agentd.managerProperties()).RuntimeCA : null;
        const u = new URL(url);
        const ws = new StreamWebSocket(openRuntimeStream(url, ca),
                                       { host: u.host, path: '/socket.io/?EIO=4&transport=websocket' });
        this.rpc = new RuntimeSocket(ws, token);
        this.rpc.onclose = (reason) => {
            this.status('Disconnected: ' + reason);
            if (this.term)
                this.term.setOption('disableStdin', true);
        };
        await this.rpc.connected;

        this.term = new AgentixXterm({ rendererType: 'dom', cursorBlink: true, scrollback: 5000 });
        this.term.open(this.element);
        this.term.fit();
        this.term.focus();
        this.callId = this.rpc.call('sandbox::exec', 'bidi', {
            command: SHELL,
            pty: true,
            rows: this.term.rows,
            cols: this.term.cols,
            timeout: 0,
            max_output: Number.MAX_SAFE_INTEGER,
            env: { TERM: 'xterm-256color' },
        }, {
            onItem: (item) => {
                if (item.data instanceof Uint8Array)
                    this.term.write(this.decoder.decode(item.data, { stream: true }));
                else if (typeof item.exit_code === 'number')
                    this.term.write('\r\n[the shell exited with status ' + item.exit_code + ']\r\n');
            },
            onEnd: () => this.status('The shell ended.'),
            onError: (e) => this.status('The shell failed: ' + e.message),
        });
        this.term.on('data', (data) => this.rpc.sendIn(this.callId, { stdin: encoder.encode(data) }));
        this.term.on('resize', ({ cols, rows }) => this.rpc.sendIn(this.callId, { resize: [rows, cols] }));
        this.status('Connected.');
    }

    fit() {
        if (this.term)
            this.term.fit();
    }

    close() {
        if (this.rpc) {
            if (this.callId)
                this.rpc.cancel(this.callId);
            this.rpc.close();
            this.rpc = null;
        }
        if (this.term) {
            this.term.dispose();
            this.term = null;
        }
    }
}
