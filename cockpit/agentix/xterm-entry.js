// SPDX-License-Identifier: MIT
// What meson bundles (esbuild) into xterm.js for the page: Debian's node-xterm ships CommonJS
// modules only, which a browser cannot load, so its Terminal and fit addon become one script
// that sets window.AgentixXterm.
const { Terminal } = require('xterm/lib/public/Terminal');
const fit = require('xterm/lib/addons/fit/fit');

Terminal.applyAddon(fit);
window.AgentixXterm = Terminal;
