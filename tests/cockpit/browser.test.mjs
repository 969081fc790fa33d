// SPDX-License-Identifier: MIT
// The Cockpit page in headless Chromium, as alice (group agentix) after Cockpit's login page;
// the container it runs in is set up by test_cockpit.py. The steps run in order and share the
// browser: each leaves the page as the next expects it.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { join } from 'node:path';

const require = createRequire(join(process.env.NODE_MODULES, 'x.js'));
const { chromium } = require('playwright-core');

const URL = process.env.COCKPIT_URL;
const CONTAINER = process.env.COCKPIT_CONTAINER;
const PASSWORD = process.env.COCKPIT_PASSWORD;
const IMAGE = process.env.AGENTIX_TEST_IMAGE;
const BUNDLE = process.env.AGENTIX_TEST_BUNDLE;
const SHOTS = process.env.SCREENSHOTS;
const FRAME = 'cockpit1:localhost/agentix';
const LONG = 180_000; // a create or a pool member may take this long on a loaded 2-core machine

// A command in the container as a user; its standard output.
function sh(user, command) {
    const r = spawnSync('docker', ['exec', CONTAINER, 'runuser', '-u', user, '--', 'sh', '-c', command],
                        { encoding: 'utf8', timeout: LONG });
    if (r.status !== 0)
        throw new Error(`${command} (as ${user}) exited ${r.status}: ${r.stdout}${r.stderr}`);
    return r.stdout;
}

// busctl's try of the same call: its error message, as agentd wrote it.
function busctlError(user, args) {
    const r = spawnSync('docker', ['exec', CONTAINER, 'runuser', '-u', user, '--', 'busctl', '--system', 'call',
                                   'org.agentix.Agentd1', '/org/agentix/Agentd1', 'org.agentix.Agentd1.Manager', ...args],
                        { encoding: 'utf8', timeout: LONG });
    assert.notEqual(r.status, 0, 'busctl call succeeded: ' + r.stdout);
    return r.stderr.trim().replace(/^Call failed: /, '');
}

function property(user, id, name) {
    const out = sh(user, `busctl --system get-property org.agentix.Agentd1 /org/agentix/Agentd1/sandbox/${id} ` +
                         `org.agentix.Agentd1.Sandbox ${name}`);
    return out.trim().replace(/^[a-z] /, '').replace(/^"(.*)"$/, '$1');
}

let browser, page, frame;
const consoleErrors = []; // { url, text } from every frame
const pageErrors = [];
const made = {}; // what the steps made: ids

const row = (id) => frame.locator(`#sandboxes tbody tr[data-id="${id}"]`);

async function shot(name) {
    await page.screenshot({ path: join(SHOTS, name + '.png'), fullPage: true });
}

async function tab(view) {
    await frame.locator(`#tabs button[data-view="${view}"]`).click();
    await frame.locator(`#view-${view}`).waitFor({ state: 'visible' });
}

async function waitState(id, state) {
    await frame.locator(`#sandboxes tbody tr[data-id="${id}"][data-state="${state}"]`).waitFor({ timeout: LONG });
}

// A step; when it fails, a screenshot of how the page looked then, beside the others.
function step(title, body) {
    it(title, async () => {
        try {
            await body();
        } catch (e) {
            if (page)
                await shot('failed-' + title.replace(/[^a-z0-9]+/gi, '-').slice(0, 60)).catch(() => {});
            throw e;
        }
    });
}

describe('the agentix page in Cockpit', () => {
    before(async () => {
        browser = await chromium.launch({
            executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
            args: ['--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking'],
        });
        const context = await browser.newContext({ ignoreHTTPSErrors: true, viewport: { width: 1400, height: 900 } });
        page = await context.newPage();
        page.on('console', (msg) => {
            if (msg.type() === 'error')
                consoleErrors.push({ url: msg.location().url, text: msg.text() });
        });
        page.on('pageerror', (e) => pageErrors.push(e.message));
    });

    after(async () => {
        if (browser)
            await browser.close();
    });

    step('logs in as alice through Cockpit\'s login page and opens the page in the shell', async () => {
        await page.goto(URL);
        await page.locator('#login-user-input').fill('alice');
        await page.locator('#login-password-input').fill(PASSWORD);
        await shot('01-login');
        await page.locator('#login-button').click();
        // Logged in once the shell shows a page in its frame (a refused login stays on the form).
        await page.waitForSelector('iframe[name^="cockpit1:"]', { timeout: 60_000 }).catch(async (e) => {
            const why = await page.locator('#login-error-message').textContent().catch(() => '');
            throw new Error('no Cockpit shell after the login: ' + (why || e.message));
        });
        await page.goto(URL + '/agentix');
        await page.waitForSelector(`iframe[name="${FRAME}"]`, { timeout: 60_000 });
        frame = page.frame({ name: FRAME });
        assert.ok(frame, 'no frame for the page');
        await frame.locator('body[data-ready="1"]').waitFor({ timeout: 60_000 });
        assert.match(await frame.locator('#host-line').textContent(), /alice/);
        assert.equal(await frame.locator('#access-line').isVisible(), false); // limited access: alice's own
        assert.equal(await frame.locator('#error').isVisible(), false, await frame.locator('#error').textContent());
    });

    step('a sandbox made with agentixctl appears without reload; another user\'s never does', async () => {
        made.bob = JSON.parse(sh('bob', `agentixctl --json -q create --image=${IMAGE} --bundle=${BUNDLE}`)).id;
        assert.match(sh('bob', 'agentixctl --json list'), new RegExp(made.bob)); // it exists, for bob
        made.cli = JSON.parse(sh('alice', `agentixctl --json -q create --image=${IMAGE} --bundle=${BUNDLE}`)).id;
        await waitState(made.cli, 'running');
        // bob's SandboxNew came before alice's: had the page shown it, it would be there now.
        assert.equal(await row(made.bob).count(), 0, "bob's sandbox is shown to alice");
        assert.match(await row(made.cli).textContent(), /alice \(you\)/);
    });

    step('creates a sandbox from the page', async () => {
        await tab('create');
        await frame.locator('#create-pool').selectOption('');
        await frame.locator('#create-image').fill(IMAGE);
        await frame.locator('#create-bundle').fill(BUNDLE);
        await frame.locator('#create-memory').fill('256');
        await frame.locator('#create-ttl').fill('30');
        await frame.locator('#create-submit').click();
        // The page shows the list with the new one once made; the form keeps saying so.
        await frame.locator('#create-message', { hasText: /^Created / }).waitFor({ state: 'attached', timeout: LONG });
        made.page = (await frame.locator('#create-message').textContent()).match(/^Created (\S+)\./)[1];
        await waitState(made.page, 'running');
        // agentd made it as the form said.
        assert.equal(property('alice', made.page, 'Memory'), String(256 * 1024 * 1024));
        assert.equal(property('alice', made.page, 'Owner'), sh('alice', 'id -u').trim());
        // CPU and memory from GetStats appear in its row.
        await frame.locator(`#sandboxes tbody tr[data-id="${made.page}"] td:nth-child(10)`, { hasText: /MiB|KiB/ })
            .waitFor({ timeout: 30_000 });
        await shot('02-sandboxes');
    });

    step('runs echo hi in the terminal and reads hi', async () => {
        await row(made.page).click();
        await frame.locator('#detail-id', { hasText: made.page }).waitFor();
        await frame.locator('#action-terminal').click();
        await frame.locator('#terminal-status', { hasText: 'Connected.' }).waitFor({ timeout: 60_000 });
        const rows = frame.locator('#terminal .xterm-rows');
        await rows.filter({ hasText: /#|\$/ }).waitFor({ timeout: 30_000 }); // the shell's prompt
        await frame.locator('#terminal .xterm-helper-textarea').focus();
        await page.keyboard.type('echo hi');
        await page.keyboard.press('Enter');
        const lines = async () => (await rows.locator(':scope > div').allTextContents()).map((l) => l.trim());
        const deadline = Date.now() + 30_000;
        while (!(await lines()).includes('hi')) {
            assert.ok(Date.now() < deadline, 'no line "hi" in the terminal: ' + JSON.stringify(await lines()));
            await new Promise((r) => setTimeout(r, 200));
        }
        assert.ok((await lines()).some((l) => l.endsWith('echo hi')), JSON.stringify(await lines()));
        await shot('03-terminal');
    });

    step('pauses and resumes it', async () => {
        await frame.locator('#action-pause').click();
        await waitState(made.page, 'paused');
        assert.equal(property('alice', made.page, 'State'), 'paused');
        await frame.locator('#action-resume').click();
        await waitState(made.page, 'running');
        assert.equal(property('alice', made.page, 'State'), 'running');
    });

    step('extends it, shows its logs, takes a snapshot and deletes the snapshot', async () => {
        const before = Number(property('alice', made.page, 'ExpiresAt'));
        await frame.locator('#extend-minutes').fill('10');
        await frame.locator('#action-extend').click();
        await frame.locator('#detail-message', { hasText: 'Extended by 10 min.' }).waitFor();
        assert.equal(Number(property('alice', made.page, 'ExpiresAt')) - before, 600 * 1e6);

        await frame.locator('#action-logs').click();
        await frame.locator('#logs').waitFor({ state: 'visible' });

        // A port link: GetPortUrl's address with its token, for a browser.
        await frame.locator('#port-number').fill('8080');
        await frame.locator('#action-port').click();
        const link = frame.locator('#port-link a');
        await link.waitFor({ state: 'visible' });
        const href = new globalThis.URL(await link.getAttribute('href'));
        assert.match(href.pathname, /^\/proxy\/8080\/$/);
        assert.ok(href.searchParams.get('agentix_token'), href.toString());

        await frame.locator('#action-snapshot').click();
        await frame.locator('#detail-message', { hasText: /^Snapshot \S+ taken/ }).waitFor({ timeout: LONG });
        const image = (await frame.locator('#detail-message').textContent()).match(/^Snapshot (\S+) taken/)[1];
        await tab('snapshots');
        const snapshot = frame.locator(`#snapshots tbody tr[data-image="${image}"]`);
        await snapshot.waitFor();
        await shot('04-snapshots');
        await snapshot.locator('button').click();
        await snapshot.waitFor({ state: 'detached', timeout: LONG });
        assert.doesNotMatch(sh('alice', 'busctl --system --json=short call org.agentix.Agentd1 /org/agentix/Agentd1 ' +
                                        'org.agentix.Agentd1.Manager ListSnapshots'), new RegExp(image));
        await tab('sandboxes');
    });

    step('deletes it', async () => {
        await row(made.page).click();
        await frame.locator('#action-delete').click();
        await row(made.page).waitFor({ state: 'detached', timeout: LONG });
        await frame.locator('#detail').waitFor({ state: 'hidden' }); // its panel went with it
        assert.doesNotMatch(sh('alice', 'agentixctl --json list'), new RegExp(made.page));
    });

    step('shows the pool and creates from it; a delete elsewhere removes the row', async () => {
        await tab('pools');
        const pool = frame.locator('#pools tbody tr[data-pool="warm"]');
        await pool.waitFor();
        assert.deepEqual((await pool.locator('td').allTextContents()).filter((_, i) => i !== 1), ['warm', '1', '']);
        await shot('05-pools');
        await tab('create');
        await frame.locator('#create-pool').selectOption('warm');
        await frame.waitForFunction(() => document.getElementById('create-image-fields').disabled); // a pool fixes those
        await frame.locator('#create-submit').click();
        // The page shows the list with the new one once made; the form keeps saying so.
        await frame.locator('#create-message', { hasText: /^Created / }).waitFor({ state: 'attached', timeout: LONG });
        made.pool = (await frame.locator('#create-message').textContent()).match(/^Created (\S+)\./)[1];
        await waitState(made.pool, 'running');
        assert.equal(property('alice', made.pool, 'Pool'), 'warm');
        assert.match(await row(made.pool).textContent(), /warm/);
        sh('alice', `agentixctl delete ${made.pool}`);
        await row(made.pool).waitFor({ state: 'detached', timeout: LONG });
    });

    step('shows agentd\'s error as agentd wrote it (a create with an unknown image)', async () => {
        const missing = 'agentix-test/no-such-image:1';
        const expected = busctlError('alice', ['--timeout=300', 'CreateSandbox', 'a{sv}', '2', 'image', 's', missing,
                                               'bundle', 's', BUNDLE]);
        await tab('create');
        await frame.locator('#create-pool').selectOption(''); // an image again, not the pool
        await frame.locator('#create-image').fill(missing);
        await frame.locator('#create-bundle').fill(BUNDLE);
        await frame.locator('#create-submit').click();
        await frame.locator('#error').waitFor({ state: 'visible', timeout: LONG });
        assert.equal((await frame.locator('#error-text').textContent()).trim(), expected);
        await shot('06-create-error');
        await frame.locator('#error-close').click();
    });

    step('shows the host: backends, runtimes, defaults and usage', async () => {
        await tab('host');
        await frame.locator('#host-properties', { hasText: 'docker: loaded' }).waitFor();
        await frame.locator('#host-usage dt', { hasText: 'Sandboxes' }).waitFor();
        await shot('07-host');
        await tab('sandboxes');
        await shot('08-sandboxes-at-the-end');
    });

    step('a runtime that serves TLS: the terminal verifies it against agentd\'s RuntimeCA', async () => {
        sh('root', "mkdir -p /etc/agentix/agentd.conf.d && printf '[Runtime]\\nTLS=yes\\n' > " +
                   '/etc/agentix/agentd.conf.d/50-tls.conf && systemctl restart agentd');
        // Limits no pool has: made now, with TLS, not claimed from the pool made before.
        made.tls = JSON.parse(sh('alice', `agentixctl --json -q create --image=${IMAGE} --bundle=${BUNDLE} --memory=300M`)).id;
        assert.match(property('alice', made.tls, 'RuntimeUrl'), /^https:\/\//);
        await tab('sandboxes');
        await waitState(made.tls, 'running'); // after agentd's restart, from its signals again
        await row(made.tls).click();
        await frame.locator('#detail-id', { hasText: made.tls }).waitFor();
        await frame.locator('#action-terminal').click();
        await frame.locator('#terminal-status', { hasText: 'Connected.' }).waitFor({ timeout: 60_000 });
        const rows = frame.locator('#terminal .xterm-rows');
        await rows.filter({ hasText: /#|\$/ }).waitFor({ timeout: 30_000 });
        await frame.locator('#terminal .xterm-helper-textarea').focus();
        await page.keyboard.type('echo tls-$((6*7))');
        await page.keyboard.press('Enter');
        await rows.locator(':scope > div', { hasText: /^\s*tls-42\s*$/ }).waitFor({ timeout: 30_000 });
        await shot('09-terminal-over-tls');
    });

    step('with administrative access on, alice\'s page shows every sandbox, bob\'s too', async () => {
        assert.equal(await row(made.bob).count(), 0);
        await page.getByRole('button', { name: 'Limited access' }).click();
        await page.locator('.pf-c-modal-box input[type="password"]').fill(PASSWORD);
        await page.getByRole('button', { name: 'Authenticate' }).click();
        await page.locator('button', { hasText: 'Administrative access' }).waitFor({ timeout: 60_000 });
        // The page starts again as root (its frame may be a new one) and lists bob's sandbox.
        const deadline = Date.now() + 60_000;
        for (;;) {
            frame = page.frame({ name: FRAME });
            if (frame && await row(made.bob).count().catch(() => 0) > 0)
                break;
            assert.ok(Date.now() < deadline, "bob's sandbox is not shown with administrative access");
            await new Promise((r) => setTimeout(r, 250));
        }
        assert.match(await row(made.bob).locator('td:nth-child(2)').textContent(), /^bob$/);
        assert.equal(await frame.locator('#access-line').isVisible(), true);
        await shot('10-administrative-access');
    });

    it('the page logged no error and threw nothing', () => {
        const ours = consoleErrors.filter((e) => e.url.includes('/agentix/'));
        for (const e of consoleErrors.filter((x) => !ours.includes(x)))
            console.log(`  (Cockpit's own console error, not the page's: ${e.url}: ${e.text})`);
        assert.deepEqual(ours, [], JSON.stringify(ours));
        assert.deepEqual(pageErrors, [], JSON.stringify(pageErrors));
    });
});
