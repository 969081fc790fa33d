// SPDX-License-Identifier: MIT
// The sandboxes the user may see, kept current from agentd's signals (SandboxNew,
// SandboxRemoved, PropertiesChanged) rather than by polling the list; CPU and memory from
// GetStats every few seconds for the running ones.
import { MANAGER_PATH } from './agentd.js';
import { $, el, row, bytes, usecTime, showError } from './ui.js';

const STATS_INTERVAL_MS = 3000;

export class SandboxList {
    constructor(agentd, { myUid, onSelect, onGone, onManagerChanged }) {
        this.agentd = agentd;
        this.myUid = myUid;
        this.onSelect = onSelect;
        this.onGone = onGone;
        this.onManagerChanged = onManagerChanged;
        this.sandboxes = new Map(); // path -> properties (+ stats)
        this.userNames = new Map(); // uid -> login name, where /etc/passwd has it
        this.selected = null;
        this.generation = 0;
        this.unwatch = agentd.watch({
            onNew: (id, path) => this.fetch(path),
            onRemoved: (id, path) => this.remove(path),
            onChanged: (path, changed) => this.changed(path, changed),
            onOwner: (owner) => {
                if (owner)
                    this.reload();
            },
        });
        this.timer = setInterval(() => this.refreshStats(), STATS_INTERVAL_MS);
    }

    async reload() {
        const generation = ++this.generation;
        let list;
        try {
            list = await this.agentd.listSandboxes();
        } catch (e) {
            showError(e);
            return;
        }
        if (generation !== this.generation)
            return;
        const paths = new Set(list.map(([, , , path]) => path));
        for (const path of [...this.sandboxes.keys()])
            if (!paths.has(path))
                this.remove(path);
        await Promise.all([...paths].map((path) => this.fetch(path)));
    }

    // A sandbox agentd announced or listed; one that is not the caller's is no object of theirs
    // (agentd answers UnknownObject), and stays out of the list.
    async fetch(path) {
        let props;
        try {
            props = await this.agentd.sandboxProperties(path);
        } catch (e) {
            return;
        }
        const old = this.sandboxes.get(path) || {};
        this.sandboxes.set(path, { ...old, ...props, path });
        this.render();
    }

    remove(path) {
        if (!this.sandboxes.delete(path))
            return;
        if (this.selected === path) {
            this.selected = null;
            this.onGone(path);
        }
        this.render();
    }

    changed(path, changed) {
        if (path === MANAGER_PATH) {
            this.onManagerChanged(changed);
            return;
        }
        const s = this.sandboxes.get(path);
        if (!s)
            return;
        Object.assign(s, changed);
        this.render();
        if (this.selected === path)
            this.onSelect(s, false);
    }

    get(path) {
        return this.sandboxes.get(path);
    }

    select(path) {
        this.selected = path;
        this.render();
        const s = this.sandboxes.get(path);
        if (s)
            this.onSelect(s, true);
    }

    // One round at a time: with many sandboxes (an administrator sees them all) a slow round
    // is skipped over rather than piled up.
    async refreshStats() {
        if (this.statsBusy)
            return;
        this.statsBusy = true;
        try {
            await this.readStats();
        } finally {
            this.statsBusy = false;
        }
    }

    async readStats() {
        const running = [...this.sandboxes.values()].filter((s) => s.State === 'running' || s.State === 'paused');
        await Promise.all(running.map(async (s) => {
            try {
                const stats = await this.agentd.stats(s.path);
                s.stats = stats;
            } catch (e) {
                s.stats = null; // not running any more, or a backend that cannot tell
            }
        }));
        if (running.length)
            this.render();
    }

    // The owner's name where the host's passwd file has it (users from a directory service
    // show as their uid).
    owner(uid) {
        const name = this.userNames.get(uid) || String(uid);
        return uid === this.myUid ? name + ' (you)' : name;
    }

    setUserNames(passwd) {
        for (const line of (passwd || '').split('\n')) {
            const [name, , uid] = line.split(':');
            if (name && /^\d+$/.test(uid || ''))
                this.userNames.set(Number(uid), name);
        }
        this.render();
    }

    render() {
        const tbody = $('sandboxes').querySelector('tbody');
        const rows = [...this.sandboxes.values()].sort((a, b) => Number(a.CreatedAt) - Number(b.CreatedAt));
        tbody.replaceChildren(...rows.map((s) => {
            const stats = s.stats || {};
            const state = el('span', s.State, 'state state-' + s.State);
            const tr = row([s.Id, this.owner(s.Owner), state, s.Image, s.Bundle, s.Runtime || 'default', s.Pool || '',
                            usecTime(s.ExpiresAt),
                            stats.cpu_percent !== undefined ? stats.cpu_percent.toFixed(1) + ' %' : '',
                            stats.memory_current !== undefined
                                ? bytes(stats.memory_current) + (stats.memory_limit ? ' / ' + bytes(stats.memory_limit) : '')
                                : '']);
            tr.dataset.id = s.Id;
            tr.dataset.state = s.State;
            if (s.path === this.selected)
                tr.classList.add('selected');
            tr.addEventListener('click', () => this.select(s.path));
            return tr;
        }));
        $('no-sandboxes').hidden = rows.length > 0;
    }
}
