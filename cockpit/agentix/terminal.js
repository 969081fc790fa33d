// SPDX-License-Identifier: MIT
// A terminal into a sandbox: the runtime's sandbox::exec as a bidi call with a PTY, over the
// runtime's WebSocket (GetRuntimeAccess gives its URL and token), shown in xterm.js. The bridge
// opens the connection from the host, the runtime's address being one only the host reaches:
// TCP, or for an https runtime TLS verified against agentd's RuntimeCA.
/* global cockpit, AgentixXterm */
import { StreamWebSocket } from './websocket.js';
import { RuntimeSocket } from './runtime-socket.js';

// The image's bash when it has one, else its sh (busybox images have only that).
const SHELL = 'if command -v bash >/dev/null 2>&1; then exec bash -il; else exec sh -i; fi';

const encoder = new TextEncoder();

// openssl s_client as the TLS end of an https runtime's stream: Cockpit 287's bridge does no TLS
// on a "stream" channel, and takes a CA only from a file (its "authority": {"data"} is written
// to a temporary file GLib reads after it is gone). The CA goes in on a pipe (bash's <(…)), the
// certificate must chain to it, name the URL's address and the sandbox (ID.sandbox.agentix: on a
// swarm node every runtime has the node's address), and anything else ends the stream.
const TLS_CLIENT = 'exec openssl s_client -quiet -nocommands -verify_return_error -no_ign_eof ' +
    '"${@:3}" -CAfile <(printf %s "$1") -connect "$2"';

function isAddress(host) {
    return host.includes(':') || /^[0-9.]+$/.test(host);
}

// The name agentd's certificate for sandbox id's runtime carries beside its address.
export function sandboxTlsName(id) {
    if (!/^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/.test(id))
        throw new Error('not a sandbox id: ' + id);
    return id + '.sandbox.agentix';
}

// What s_client checks: the sandbox's name and the address (OpenSSL enforces both); for a
// runtime URL with a DNS name rather than an address (agentd gives addresses), the sandbox's
// name, which s_client cannot check beside a second name.
function tlsChecks(host, id) {
    const name = id ? sandboxTlsName(id) : null;
    if (isAddress(host))
        return name ? ['-verify_hostname', name, '-verify_ip', host] : ['-verify_ip', host];
    return ['-verify_hostname', name || host];
}

// A byte stream to the runtime of url (sandbox id's), opened by the bridge (see websocket.js).
export function openRuntimeStream(url, ca, id) {
    const u = new URL(url);
    const https = u.protocol === 'https:';
    const host = u.hostname.replace(/^\[(.*)\]$/, '$1');
    const port = Number(u.port || (https ? 443 : 80));
    let options;
    if (https) {
        const target = (host.includes(':') ? '[' + host + ']' : host) + ':' + port;
        options = {
            payload: 'stream',
            spawn: ['bash', '-c', TLS_CLIENT, 'bash', ca, target, ...tlsChecks(host, id)],
            err: 'message',
            binary: true,
        };
    } else {
        options = { payload: 'stream', address: host, port, binary: true };
    }
    const channel = cockpit.channel(options);
    const stream = { onData: null, onClose: null };
    let heard = false;
    let ended = false;
    const end = (why) => {
        if (ended)
            return;
        ended = true;
        if (stream.onClose)
            stream.onClose(why);
    };
    stream.send = (u8) => channel.send(u8);
    stream.close = () => {
        ended = true;
        channel.close();
    };
    channel.addEventListener('message', (event, data) => {
        heard = true;
        if (stream.onData)
            stream.onData(data);
    });
    // The far end is done: for https before a byte came, the TLS handshake failed.
    channel.addEventListener('control', (event, message) => {
        if (message.command !== 'done')
            return;
        end(https && !heard
            ? 'no TLS connection to the runtime at ' + u.host + ': its certificate is not one agentd\'s ' +
              'runtime CA issued for this sandbox at that address, or nothing answers there'
            : 'the runtime at ' + u.host + ' closed the connection');
        channel.close();
    });
    channel.addEventListener('close', (event, options) => {
        end(options.problem || options.message
            ? 'cannot reach the runtime at ' + u.host + ': ' + (options.message || cockpit.message(options))
            : null);
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
        const ws = new StreamWebSocket(openRuntimeStream(url, ca, id),
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
