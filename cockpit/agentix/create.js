// SPDX-License-Identifier: MIT
// The create form: CreateSandbox's a{sv} from what was filled in. Left empty, a key is not
// sent and agentd's default applies; from a pool, only the pool and the TTL go (agentd refuses
// image, bundle, limits, runtime or network beside a pool).
import { $, showError, clearError } from './ui.js';

const MiB = 1024 * 1024;

function number(id, what, { integer = false, min = 0 } = {}) {
    const raw = $(id).value.trim();
    if (raw === '')
        return null;
    const n = Number(raw);
    if (!Number.isFinite(n) || n < min || (integer && !Number.isInteger(n)))
        throw new Error(what + ' must be ' + (integer ? 'a whole number' : 'a number') + ' of at least ' + min + '.');
    return n;
}

export function createConfig() {
    const config = {};
    const pool = $('create-pool').value;
    const ttl = number('create-ttl', 'TTL (minutes)', { integer: true, min: 1 });
    if (ttl !== null)
        config.ttl = { t: 't', v: ttl * 60 };
    if (pool) {
        config.pool = { t: 's', v: pool };
        return config;
    }
    // Image and bundle are agentd's to require: an empty one is its InvalidConfig, said as it says.
    const image = $('create-image').value.trim();
    const bundle = $('create-bundle').value.trim();
    if (image)
        config.image = { t: 's', v: image };
    if (bundle)
        config.bundle = { t: 's', v: bundle };
    const cpus = number('create-cpus', 'CPUs', { min: 0.01 });
    if (cpus !== null)
        config.cpus = { t: 'd', v: cpus };
    const memory = number('create-memory', 'Memory (MiB)', { integer: true, min: 1 });
    if (memory !== null)
        config.memory = { t: 't', v: memory * MiB };
    const pids = number('create-pids', 'Processes', { integer: true, min: 1 });
    if (pids !== null)
        config.pids = { t: 't', v: pids };
    const runtime = $('create-runtime').value;
    if (runtime)
        config.runtime = { t: 's', v: runtime };
    const network = $('create-network').value.trim();
    if (network)
        config.network = { t: 's', v: network };
    return config;
}

export class CreateForm {
    constructor(agentd, { onCreated }) {
        this.agentd = agentd;
        this.onCreated = onCreated;
        $('create-pool').addEventListener('change', () => {
            $('create-image-fields').disabled = $('create-pool').value !== '';
        });
        $('create-form').addEventListener('submit', (event) => {
            event.preventDefault();
            this.submit();
        });
    }

    // Runtimes (a(ssb): backend, runtime, allowed) and pools offered by the form.
    offer(runtimes, pools) {
        const runtimeSelect = $('create-runtime');
        const chosen = runtimeSelect.value;
        const names = [...new Set((runtimes || []).filter(([, , allowed]) => allowed).map(([, name]) => name))];
        runtimeSelect.replaceChildren(new Option('default', ''), ...names.map((n) => new Option(n, n)));
        runtimeSelect.value = names.includes(chosen) ? chosen : '';

        const poolSelect = $('create-pool');
        const pool = poolSelect.value;
        poolSelect.replaceChildren(new Option('none: give an image and bundle', ''),
                                   ...pools.map((p) => new Option(p.name + ' (' + p.ready + ' ready)', p.name)));
        poolSelect.value = pools.some((p) => p.name === pool) ? pool : '';
        $('create-image-fields').disabled = poolSelect.value !== '';
    }

    async submit() {
        const message = $('create-message');
        const button = $('create-submit');
        clearError();
        let config;
        try {
            config = createConfig();
        } catch (e) {
            message.textContent = e.message;
            return;
        }
        button.disabled = true;
        message.textContent = 'Creating… (the reply comes once its runtime answers)';
        try {
            const { id, path } = await this.agentd.create(config);
            message.textContent = 'Created ' + id + '.';
            this.onCreated(id, path);
        } catch (e) {
            message.textContent = '';
            showError(e);
        } finally {
            button.disabled = false;
        }
    }
}
