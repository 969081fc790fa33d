// SPDX-License-Identifier: MIT
// One sandbox: its properties and what its owner (or root) may do with it. Every action is a
// call to agentd; what agentd refuses is shown as it said it.
import { $, dl, usecTime, bytes, showError, clearError } from './ui.js';
import { SandboxTerminal } from './terminal.js';

const LOG_LINES = 500;

export class SandboxDetail {
    constructor(agentd) {
        this.agentd = agentd;
        this.sandbox = null;
        this.terminal = null;
        const on = (id, f) => $(id).addEventListener('click', () => this.run(id, f));
        on('action-terminal', () => this.openTerminal());
        on('action-logs', () => this.showLogs());
        on('action-pause', () => this.agentd.sandbox(this.sandbox.path, 'Pause'));
        on('action-resume', () => this.agentd.sandbox(this.sandbox.path, 'Resume'));
        on('action-hibernate', () => this.agentd.sandbox(this.sandbox.path, 'Hibernate'));
        on('action-extend', () => this.extend());
        on('action-snapshot', () => this.snapshot());
        on('action-port', () => this.portLink());
        on('action-delete', () => this.agentd.sandbox(this.sandbox.path, 'Delete'));
        window.addEventListener('resize', () => this.terminal && this.terminal.fit());
    }

    // An action: the button waits while agentd works; an error goes to the banner verbatim.
    async run(buttonId, action) {
        if (!this.sandbox)
            return;
        const button = $(buttonId);
        button.disabled = true;
        clearError();
        try {
            await action();
        } catch (e) {
            showError(e);
        } finally {
            button.disabled = false;
        }
    }

    message(text) {
        $('detail-message').textContent = text;
    }

    show(sandbox, fresh) {
        if (fresh && this.sandbox && this.sandbox.path !== sandbox.path)
            this.reset();
        this.sandbox = sandbox;
        $('detail').hidden = false;
        $('detail-id').textContent = sandbox.Id;
        const state = $('detail-state');
        state.textContent = sandbox.State;
        state.className = 'state state-' + sandbox.State;
        $('action-pause').hidden = sandbox.State !== 'running';
        $('action-resume').hidden = sandbox.State !== 'paused' && sandbox.State !== 'hibernated';
        // gVisor sandboxes only: agentd says so (NotSupported, naming runsc) for the others.
        $('action-hibernate').hidden = sandbox.State !== 'running' || sandbox.Runtime !== 'runsc';
        const labels = Object.entries(sandbox.Labels || {}).map(([k, v]) => k + '=' + v).join('\n');
        dl($('detail-properties'), [
            ['Image', sandbox.Image],
            ['Bundle', sandbox.Bundle],
            ['Backend', sandbox.Backend],
            ['OCI runtime', sandbox.Runtime || 'default'],
            ['Platform', sandbox.Platform || 'default'],
            ['Pool', sandbox.Pool || '—'],
            ['CPUs', sandbox.CPUs],
            ['Memory limit', bytes(sandbox.Memory)],
            ['Created', usecTime(sandbox.CreatedAt)],
            ['Expires', usecTime(sandbox.ExpiresAt)],
            ['Runtime URL', sandbox.RuntimeUrl || '—'],
            ['Container', sandbox.ContainerId || '—'],
            ['Labels', labels || '—'],
        ]);
    }

    // The sandbox went away (deleted here or elsewhere): its panel goes too.
    gone() {
        $('detail').hidden = true;
        this.sandbox = null;
        this.reset();
    }

    reset() {
        if (this.terminal) {
            this.terminal.close();
            this.terminal = null;
        }
        $('terminal').replaceChildren();
        $('terminal-box').hidden = true;
        $('logs').hidden = true;
        $('port-link').hidden = true;
        this.message('');
    }

    async openTerminal() {
        if (this.terminal)
            this.terminal.close();
        $('terminal').replaceChildren();
        $('terminal-box').hidden = false;
        this.terminal = new SandboxTerminal($('terminal'), (text) => { $('terminal-status').textContent = text; });
        await this.terminal.open(this.agentd, this.sandbox.Id);
    }

    async showLogs() {
        const text = await this.agentd.logs(this.sandbox.path, LOG_LINES);
        const pre = $('logs');
        pre.textContent = text || '(nothing logged)';
        pre.hidden = false;
    }

    async extend() {
        const minutes = Number($('extend-minutes').value);
        if (!Number.isInteger(minutes) || minutes < 1)
            throw new Error('Extend by a whole number of minutes, at least 1.');
        await this.agentd.sandbox(this.sandbox.path, 'Extend', [minutes * 60], 't');
        this.message('Extended by ' + minutes + ' min.');
    }

    async snapshot() {
        this.message('Taking a snapshot…');
        const image = await this.agentd.snapshot(this.sandbox.path, $('snapshot-tag').value.trim());
        this.message('Snapshot ' + image + ' taken: a create can name it as its image.');
    }

    async portLink() {
        const port = Number($('port-number').value);
        if (!Number.isInteger(port) || port < 1 || port > 65535)
            throw new Error('A port is a number from 1 to 65535.');
        const { url, token } = await this.agentd.portUrl(this.sandbox.Id, port);
        const link = new URL(url);
        link.searchParams.set('agentix_token', token);
        const a = $('port-link').querySelector('a');
        a.href = link.toString();
        a.textContent = url;
        $('port-link').hidden = false;
    }
}

