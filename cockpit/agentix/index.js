// SPDX-License-Identifier: MIT
// The agentix page in Cockpit: tabs over the views, each fed from agentd over D-Bus as the
// logged-in user (agentd.js).
/* global cockpit */
import { Agentd } from './agentd.js';
import { $, showError, clearError } from './ui.js';
import { SandboxList } from './sandboxes.js';
import { SandboxDetail } from './sandbox-detail.js';
import { CreateForm } from './create.js';
import { renderPools, renderSnapshots, renderHost } from './host.js';

async function main() {
    const agentd = new Agentd();
    const user = await cockpit.user();
    const myUid = user.id;
    $('host-line').textContent = 'as ' + user.name;
    $('error-close').addEventListener('click', clearError);

    let manager = {};
    let pools = [];
    const refreshManager = async () => {
        try {
            [manager, pools] = await Promise.all([agentd.managerProperties(), agentd.pools()]);
        } catch (e) {
            showError(e);
            return;
        }
        form.offer(manager.Runtimes, pools);
        renderPools(pools, manager.PoolErrors);
        await renderHost(agentd, manager);
    };

    const detail = new SandboxDetail(agentd);
    const list = new SandboxList(agentd, {
        myUid,
        onSelect: (s, fresh) => detail.show(s, fresh),
        onGone: () => detail.gone(),
        onManagerChanged: () => refreshManager(),
    });
    const form = new CreateForm(agentd, {
        onCreated: async (id, path) => {
            await list.fetch(path);
            show('sandboxes');
            list.select(path);
        },
    });

    const show = (view) => {
        for (const b of $('tabs').querySelectorAll('button'))
            b.classList.toggle('active', b.dataset.view === view);
        for (const s of document.querySelectorAll('main > section'))
            s.hidden = s.id !== 'view-' + view;
        if (view === 'snapshots')
            renderSnapshots(agentd, myUid);
        if (view === 'pools' || view === 'host' || view === 'create')
            refreshManager();
    };
    for (const b of $('tabs').querySelectorAll('button'))
        b.addEventListener('click', () => show(b.dataset.view));

    cockpit.file('/etc/passwd').read()
        .then((passwd) => list.setUserNames(passwd))
        .catch(() => {}); // owners then show as uids
    await Promise.all([list.reload(), refreshManager()]);
    document.body.dataset.ready = '1'; // for tests: the first load is done
}

main().catch(showError);

// The D-Bus client goes as root only when it is opened with administrative access on: when the
// session's access changes, the page starts again with the access it has now.
const superuser = cockpit.dbus(null, { bus: 'internal' }).proxy('cockpit.Superuser', '/superuser');
let access = null; // "none", or how root is reached ("sudo"…); "init" while Cockpit finds out
const followAccess = () => {
    const now = superuser.Current;
    if (!now || now === 'init')
        return;
    if (access !== null && now !== access)
        window.location.reload();
    access = now;
    document.getElementById('access-line').hidden = access === 'none';
};
superuser.wait(() => {
    followAccess();
    superuser.addEventListener('changed', followAccess);
});
