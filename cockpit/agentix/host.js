// SPDX-License-Identifier: MIT
// What the host offers: warm pools (ListPools, PoolErrors), snapshots (ListSnapshots,
// DeleteSnapshot), agentd's backends, runtimes and defaults (Manager properties) and the
// caller's usage against their quotas (GetUsage).
import { $, el, row, dl, bytes, secTime, showError, clearError } from './ui.js';

export function renderPools(pools, poolErrors) {
    const tbody = $('pools').querySelector('tbody');
    tbody.replaceChildren(...pools.map((p) => {
        const tr = row([p.name, p.ready, p.size, (poolErrors || {})[p.name] || '']);
        tr.dataset.pool = p.name;
        return tr;
    }));
    $('no-pools').hidden = pools.length > 0;
}

export async function renderSnapshots(agentd, myUid) {
    let snapshots;
    try {
        snapshots = await agentd.snapshots();
    } catch (e) {
        showError(e);
        return;
    }
    const tbody = $('snapshots').querySelector('tbody');
    tbody.replaceChildren(...snapshots.map((s) => {
        const button = el('button', 'Delete', 'danger');
        button.addEventListener('click', async () => {
            button.disabled = true;
            clearError();
            try {
                await agentd.deleteSnapshot(s.image);
                await renderSnapshots(agentd, myUid);
            } catch (e) {
                showError(e);
                button.disabled = false;
            }
        });
        const tr = row([s.image, s.sandbox, s.owner === myUid ? s.owner + ' (you)' : s.owner, secTime(s.created),
                        bytes(s.size), button]);
        tr.dataset.image = s.image;
        return tr;
    }));
    $('no-snapshots').hidden = snapshots.length > 0;
}

export async function renderHost(agentd, props) {
    const backends = (props.Backends || []).map(([name, state, detail]) => `${name}: ${state} (${detail})`).join('\n');
    const runtimes = (props.Runtimes || [])
        .map(([backend, name, allowed]) => `${backend}: ${name}${allowed ? '' : ' (not allowed)'}`).join('\n');
    const poolErrors = Object.entries(props.PoolErrors || {}).map(([k, v]) => `${k}: ${v}`).join('\n');
    dl($('host-properties'), [
        ['Backends', backends || '—'],
        ['Default backend', props.DefaultBackend || '—'],
        ['OCI runtimes', runtimes || '— (none heard of yet)'],
        ['Default runtime', props.DefaultRuntime || "the service's own"],
        ['Pool problems', poolErrors || 'none'],
        ['Runtime TLS', props.RuntimeCA ? "on: runtimes are verified against agentd's CA" : 'off'],
    ]);
    try {
        const usage = await agentd.usage();
        const pairs = [['Sandboxes', String(usage.sandboxes) + (usage.max_sandboxes ? ' of ' + usage.max_sandboxes : '')],
                       ['CPUs', String(usage.cpus) + (usage.max_cpus ? ' of ' + usage.max_cpus : '')],
                       ['Memory', bytes(usage.memory) + (usage.max_memory ? ' of ' + bytes(usage.max_memory) : '')]];
        if (usage.snapshots !== undefined)
            pairs.push(['Snapshots', String(usage.snapshots) + (usage.max_snapshots ? ' of ' + usage.max_snapshots : '')]);
        dl($('host-usage'), pairs);
    } catch (e) {
        dl($('host-usage'), [['Usage', e.message]]);
    }
}
