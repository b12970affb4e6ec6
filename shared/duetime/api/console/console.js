// duetime console: a plain ES module, no build step, no dependencies. It talks to the public /v1 API of
// the origin it is served from, with the team's bearer token kept in sessionStorage (never in a cookie, a
// URL the page requests, the DOM or a log). Every piece of API data reaches the page through textContent
// or setAttribute, never through innerHTML.

const TOKEN_KEY = 'duetime.token';
// The console lives at <base>console/ (locally http://host:port/console/, on AWS https://host/stage/console/):
// the API is <base>v1/...
const API_BASE = new URL('../', window.location.href);
const RUNS_REFRESH_MS = 3000;
const TERMINAL = new Set(['succeeded', 'failed', 'dead', 'cancelled', 'skipped']);
const RETRYABLE = new Set(['failed', 'dead']);
const SPEC_ONLY_HIDDEN = [
  'id', 'next_run_at', 'next_nominal_at', 'last_scheduled_at', 'missing_since', 'created_at', 'updated_at',
  'last_run',
];

// --- tiny DOM helpers ---------------------------------------------------------------------------------

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (name === 'class') node.className = value;
    else if (name === 'text') node.textContent = value;
    else if (name === 'hidden') node.hidden = Boolean(value);
    else if (name.startsWith('on')) node.addEventListener(name.slice(2), value);
    else node.setAttribute(name, value === true ? '' : String(value));
  }
  append(node, children);
  return node;
}

function append(node, children) {
  for (const child of children.flat()) {
    if (child === undefined || child === null || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

const SVG_NS = 'http://www.w3.org/2000/svg';

function svg(tag, attrs, ...children) {
  const node = document.createElementNS(SVG_NS, tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (name === 'class') node.setAttribute('class', value);
    else if (name === 'text') node.textContent = value;
    else node.setAttribute(name, String(value));
  }
  for (const child of children) if (child) node.append(child);
  return node;
}

function clear(node) {
  while (node.firstChild) node.firstChild.remove();
  return node;
}

const $ = (selector, root = document) => root.querySelector(selector);

let uniqueCounter = 0;
const uid = (prefix) => `${prefix}-${++uniqueCounter}`;

// --- formatting ---------------------------------------------------------------------------------------

const DATE_TIME = new Intl.DateTimeFormat(undefined, {
  year: 'numeric', month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit', second: '2-digit',
});
const SHORT_TIME = new Intl.DateTimeFormat(undefined, { hour: '2-digit', minute: '2-digit' });
const DAY_TIME = new Intl.DateTimeFormat(undefined, {
  weekday: 'short', hour: '2-digit', minute: '2-digit',
});
const LOCAL_ZONE = Intl.DateTimeFormat().resolvedOptions().timeZone || 'UTC';

function parseInstant(iso) {
  if (!iso) return null;
  const date = new Date(iso);
  return Number.isNaN(date.getTime()) ? null : date;
}

// A <time> in the browser's local time, with the UTC instant in datetime and title.
function timeEl(iso, format = DATE_TIME) {
  const date = parseInstant(iso);
  if (!date) return el('span', { class: 'muted', text: iso ? String(iso) : '—' });
  const utc = date.toISOString().replace('.000Z', 'Z');
  return el('time', { datetime: utc, title: `${utc} (UTC)`, text: format.format(date) });
}

function formatSeconds(ms) {
  if (ms === null || ms === undefined || Number.isNaN(ms)) return '—';
  const sign = ms < 0 ? '−' : '';
  const abs = Math.abs(ms);
  if (abs < 1000) return `${sign}${Math.round(abs)} ms`;
  if (abs < 60_000) return `${sign}${(abs / 1000).toFixed(abs < 10_000 ? 2 : 1)} s`;
  const minutes = Math.floor(abs / 60_000);
  const seconds = Math.round((abs % 60_000) / 1000);
  if (minutes < 60) return `${sign}${minutes} min ${seconds} s`;
  return `${sign}${Math.floor(minutes / 60)} h ${minutes % 60} min`;
}

function formatLateness(ms) {
  // The API's instants are whole seconds: lateness is shown in seconds.
  if (ms === null || ms === undefined || Number.isNaN(ms)) return '—';
  return Math.abs(ms) < 60_000 ? `${ms < 0 ? '−' : ''}${Math.round(Math.abs(ms) / 1000)} s` : formatSeconds(ms);
}

function between(startIso, endIso) {
  const start = parseInstant(startIso);
  const end = parseInstant(endIso);
  return start && end ? end.getTime() - start.getTime() : null;
}

// What a target calls, in one line: "POST https://…" for HTTP, "sqs https://sqs.…" for an AWS service.
const AWS_TARGET_FIELDS = {
  lambda: 'function_arn', sqs: 'queue_url', sns: 'topic_arn', eventbridge: 'event_bus_name', stepfunctions: 'state_machine_arn',
};

function targetSummary(target) {
  const field = AWS_TARGET_FIELDS[target.type];
  return field ? `${target.type} ${target[field]}` : `${target.method} ${target.url}`;
}

function scheduleSummary(schedule) {
  if (!schedule) return ['—'];
  if (schedule.cron !== undefined) {
    return [el('code', { text: schedule.cron }), ` cron, ${schedule.timezone || 'UTC'}`];
  }
  if (schedule.business_day !== undefined) return [businessDayText(schedule)];
  if (schedule.rate !== undefined) return [`every ${schedule.rate}`];
  if (schedule.at !== undefined) return ['once, ', timeEl(schedule.at)];
  return [JSON.stringify(schedule)];
}

function ordinal(n) {
  const tens = n % 100;
  const suffix = tens >= 11 && tens <= 13 ? 'th' : ({ 1: 'st', 2: 'nd', 3: 'rd' })[n % 10] || 'th';
  return `${n}${suffix}`;
}

const calendarNames = (names) => names.join(', ');

// "3rd business day of the month at 09:00 Europe/Paris, calendars fr-holidays"; -1 is "last", -2 "2nd last".
function businessDayText(schedule) {
  const n = schedule.business_day;
  let which = ordinal(n);
  if (n === -1) which = 'last';
  else if (n < 0) which = `${ordinal(-n)} last`;
  const calendars = schedule.calendars && schedule.calendars.length
    ? `, calendars ${calendarNames(schedule.calendars)}` : ', Monday to Friday (no calendar)';
  return `${which} business day of the month at ${schedule.at} ${schedule.timezone || 'UTC'}${calendars}`;
}

const ON_EXCLUDED_TEXT = {
  skip: 'skip', next_business_day: 'next business day', previous_business_day: 'previous business day',
};

// "excludes fr-holidays; on an excluded date: next business day (rolled runs once)"
function exclusionText(exclude) {
  const onExcluded = exclude.on_excluded || 'skip';
  const rolled = onExcluded === 'skip' ? '' : ` (rolled runs ${exclude.rolled || 'once'})`;
  return `excludes ${calendarNames(exclude.calendars)}; on an excluded date: ${ON_EXCLUDED_TEXT[onExcluded] || onExcluded}${rolled}`;
}

// "DST: gap skip, overlap both", a side left out "default"; no policy: "DST: default rule".
function dstText(dst) {
  if (!dst || (!dst.gap && !dst.overlap)) return 'DST: default rule';
  return `DST: gap ${dst.gap || 'default'}, overlap ${dst.overlap || 'default'}`;
}

// A schedule of wall times (a cron, a business day) has DST and calendar rules; a rate or `at` is an instant.
const hasWallTimes = (schedule) => Boolean(schedule) && (schedule.cron !== undefined || schedule.business_day !== undefined);

function labelChips(labels) {
  const entries = Object.entries(labels || {});
  if (!entries.length) return el('span', { class: 'muted', text: 'none' });
  return el('ul', { class: 'chips', 'aria-label': 'Labels' },
    entries.map(([key, value]) => el('li', { class: 'chip', text: `${key}:${value}` })));
}

const STATUS_TEXT = {
  queued: 'queued', running: 'running', retry_wait: 'waiting to retry', succeeded: 'succeeded',
  failed: 'failed', dead: 'dead', cancelled: 'cancelled', skipped: 'skipped',
};

function statusBadge(status) {
  return el('span', { class: `badge status-${status}`, 'data-status': status, text: STATUS_TEXT[status] || status });
}

function stateBadge(paused) {
  return el('span', {
    class: `badge ${paused ? 'state-paused' : 'state-active'}`,
    'data-state': paused ? 'paused' : 'active',
    text: paused ? 'paused' : 'active',
  });
}

function excerpt(result) {
  if (!result) return '—';
  const parts = [];
  if (result.status_code !== null && result.status_code !== undefined) parts.push(`HTTP ${result.status_code}`);
  const detail = result.error || result.body;
  if (detail) parts.push(String(detail).replace(/\s+/g, ' ').trim());
  const text = parts.join(' · ') || '—';
  return text.length > 90 ? `${text.slice(0, 89)}…` : text;
}

// --- status messages ------------------------------------------------------------------------------------

const statusRegion = () => $('#status');
let keepStatus = false; // the next page keeps the message (e.g. "Job created" before showing the job)

function announce(message, kind = 'info', { keep = false } = {}) {
  const region = statusRegion();
  region.className = `status status-${kind}`;
  region.textContent = message;
  keepStatus = keep;
}

function clearStatus() {
  if (keepStatus) {
    keepStatus = false;
    return;
  }
  statusRegion().textContent = '';
}

// --- the token ------------------------------------------------------------------------------------------

function getToken() {
  try {
    return window.sessionStorage.getItem(TOKEN_KEY);
  } catch {
    return null;
  }
}

function setToken(token) {
  window.sessionStorage.setItem(TOKEN_KEY, token);
}

function dropToken() {
  window.sessionStorage.removeItem(TOKEN_KEY);
}

// A link such as .../console/#token=<token> signs in, once the user says so; the fragment leaves the address
// bar at once. Nothing is stored until then: someone else's link would otherwise sign the tab in silently and
// have what the user enters next go to that person's team (login CSRF). The link's team and token are looked
// up with its token, then an in-page dialog names them: in a tab signed in already, both teams ("Switch
// teams?"), in one not signed in, the link's ("Sign in with this link?"). Until the user chooses, the tab
// keeps its token, or stays signed out.
function consumeTokenFragment() {
  const hash = window.location.hash;
  if (!hash.startsWith('#token=')) return;
  let token = hash.slice('#token='.length);
  try {
    token = decodeURIComponent(token);
  } catch {
    // keep it as it came
  }
  window.history.replaceState(null, '', `${window.location.pathname}${window.location.search}#/jobs`);
  token = token.trim();
  const signedIn = getToken();
  if (!token || token === signedIn) return;
  offerLink(token, signedIn).catch((error) => reportError(error, 'Checking the link'));
}

const teamLabel = (team) => (team.name && team.name !== team.team_id ? `${team.name} (${team.team_id})` : team.team_id);

let linkCheck = 0; // the latest #token= link being checked: an earlier one's answers are dropped
let linkPrompt = null; // its open dialog

async function offerLink(linkToken, signedIn) {
  const check = ++linkCheck;
  if (linkPrompt) linkPrompt.close('superseded');
  const stale = () => check !== linkCheck;
  let linkTeam;
  let linkInfo;
  try {
    linkTeam = await api('GET', 'v1/team', { token: linkToken });
    linkInfo = await api('GET', 'v1/token', { token: linkToken }).catch((error) => {
      if (error instanceof ApiError && error.status === 404) return null; // an API that cannot say
      throw error;
    });
  } catch (error) {
    if (stale()) return;
    if (error instanceof SignedOut) refusedLink(signedIn);
    else reportError(error, 'Checking the link’s token');
    return;
  }
  let currentTeam = null;
  if (signedIn) {
    try {
      currentTeam = await api('GET', 'v1/team');
    } catch (error) {
      // The tab's own token was refused (it expired): nobody is signed in, so the link asks as in a new tab.
      if (stale() || !(error instanceof SignedOut) || getToken()) throw error;
    }
  }
  const expected = currentTeam ? signedIn : null; // the tab's token while the user is asked
  if (stale() || getToken() !== expected) return;
  const choice = await askAboutLink(currentTeam, linkTeam, linkInfo);
  if (stale() || getToken() !== expected) return;
  if (choice === 'switch' || choice === 'sign-in') switchTo(linkToken, linkTeam);
  else if (currentTeam) announce(`You are still signed in to team ${teamLabel(currentTeam)}. The link was not used.`, 'info');
  else {
    announce('You are not signed in: the link was not used.', 'info');
    $('#token-input').focus();
  }
}

function refusedLink(signedIn) {
  if (signedIn && getToken() === signedIn) {
    announce('The API refused the token in the link. You are still signed in as before.', 'error');
    return;
  }
  const message = 'The API refused the token in the link. You are not signed in.';
  if (!getToken()) showSignIn(message);
  announce(message, 'error');
}

function switchTo(token, team) {
  setToken(token);
  announce(`Signed in to team ${teamLabel(team)}.`, 'ok', { keep: true });
  route({ focus: true });
}

// The dialog a #token= link opens: with `currentTeam` (signed in), "Switch teams?", resolving to 'switch' or
// 'stay' (also Escape); without, "Sign in with this link?", resolving to 'sign-in' or 'cancel' (also Escape);
// either may resolve to 'superseded' (a newer link). Its first button, the safe choice, has the focus.
async function askAboutLink(currentTeam, linkTeam, linkInfo) {
  const to = teamLabel(linkTeam);
  let question;
  if (currentTeam) {
    const from = teamLabel(currentTeam);
    const another = currentTeam.team_id === linkTeam.team_id;
    question = {
      id: 'switch-team',
      title: 'Switch teams?',
      text: ['You are signed in to team ', el('strong', { text: from }), '. This link signs you in to team ',
        el('strong', { text: to }), another ? ' with another of its tokens. Switch?' : ' instead. Switch?'],
      hint: 'If you did not expect this link, stay: after a switch, what you enter goes to the link’s team.',
      choices: [['stay', `Stay in ${from}`, 'button secondary'], ['switch', `Switch to ${to}`, 'button']],
      fallback: 'stay',
    };
  } else {
    const token = linkInfo
      ? [' with its token ', el('strong', { class: 'token-name', text: linkInfo.name }), ' (scope ',
        el('span', { class: 'scope-name', text: linkInfo.scope }), ')']
      : [];
    question = {
      id: 'sign-in-link',
      title: 'Sign in with this link?',
      text: ['This link signs you in to team ', el('strong', { text: to }), ...token, '. Sign in?'],
      hint: 'If you did not expect this link, cancel: once signed in, what you enter goes to the link’s team.',
      choices: [['cancel', 'Cancel', 'button secondary'], ['sign-in', 'Sign in', 'button']],
      fallback: 'cancel',
    };
  }
  let dialog = null;
  const choice = await ask({
    ...question,
    opened: (shown) => {
      dialog = shown;
      linkPrompt = shown;
    },
  });
  if (linkPrompt === dialog) linkPrompt = null;
  return choice;
}

// An in-page modal dialog; resolves to the value of the button chosen, or to `fallback` on Escape. Its first
// choice has the focus: make it the safe one.
function ask({ id, title, text, hint, choices, fallback, opened }) {
  const buttons = choices.map(([value, label, className]) => el('button', { type: 'button', class: className, text: label, value }));
  const dialog = el('dialog', { id, class: 'panel dialog', 'aria-labelledby': `${id}-title`, 'aria-describedby': `${id}-text` },
    el('h2', { id: `${id}-title`, text: title }),
    el('p', { id: `${id}-text` }, text),
    hint ? el('p', { class: 'hint', text: hint }) : null,
    el('div', { class: 'actions' }, buttons));
  for (const button of buttons) button.addEventListener('click', () => dialog.close(button.value));
  return new Promise((resolve) => {
    dialog.addEventListener('close', () => {
      dialog.remove();
      resolve(dialog.returnValue || fallback);
    });
    document.body.append(dialog);
    if (opened) opened(dialog);
    dialog.showModal();
  });
}

// --- the API --------------------------------------------------------------------------------------------

class ApiError extends Error {
  constructor(status, code, message, field) {
    super(message);
    this.status = status;
    this.code = code;
    this.field = field || null;
  }
}

class SignedOut extends Error {}

// One request at a time: the page never has two API calls in flight, so however its refreshes overlap it
// stays well inside the team's API rate (20 a second by default), which it shares with the team's scripts.
// A call that hangs is given up after REQUEST_TIMEOUT_MS.
const REQUEST_TIMEOUT_MS = 30_000;
let apiQueue = Promise.resolve();

function api(method, path, options = {}) {
  const call = apiQueue.then(() => request(method, path, options));
  apiQueue = call.catch(() => undefined);
  return call;
}

async function request(method, path, { query, body, token = getToken() } = {}) {
  if (!token) {
    if ($('#sign-in').hidden) signOut(); // else signed out already: its message stays
    throw new SignedOut('signed out');
  }
  const url = new URL(path, API_BASE);
  for (const [name, value] of Object.entries(query || {})) {
    if (value !== undefined && value !== null && value !== '') url.searchParams.set(name, String(value));
  }
  const headers = { Authorization: `Bearer ${token}`, Accept: 'application/json' };
  const init = {
    method, headers, credentials: 'omit', cache: 'no-store', referrerPolicy: 'no-referrer',
    signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
  };
  if (body !== undefined) {
    headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  let response;
  try {
    response = await fetch(url, init);
  } catch (error) {
    if (error && error.name === 'TimeoutError') {
      throw new ApiError(0, 'timeout', 'The duetime API did not answer in time. Try again.');
    }
    throw new ApiError(0, 'network', 'The duetime API could not be reached. Check your connection.');
  }
  if (response.status === 401) {
    if (getToken() === token) signOut('The API refused your token (it may have expired). Sign in again.');
    throw new SignedOut('unauthorized');
  }
  const text = await response.text();
  let data = null;
  if (text) {
    try {
      data = JSON.parse(text);
    } catch {
      data = null;
    }
  }
  if (!response.ok) {
    const error = (data && data.error) || {};
    throw new ApiError(
      response.status,
      error.code || `http_${response.status}`,
      error.message || `The API answered ${response.status}.`,
      error.field,
    );
  }
  return data;
}

const jobPath = (id) => `v1/jobs/${encodeURIComponent(id)}`;
const runPath = (id) => `v1/runs/${encodeURIComponent(id)}`;

// --- the token in use and what its scope lets the page offer ---------------------------------------------
// GET v1/token, once per token: the header names the token, and body[data-scope] hides (console.css) each
// control marked data-needs="operate" or "admin" that the token's scope may not use, so nothing is offered
// that the API would refuse (403). Until the answer comes, data-scope is "pending" and those controls wait
// hidden; an API that cannot say (no such route) leaves them all offered, and the API decides.

const SCOPES = ['read', 'operate', 'admin']; // each may do all the ones before it may
let tokenInUse = null; // { token, info, ready }: the tab's token, what the API said of it, the pending call

function scopeAllows(scope, needed) {
  return !SCOPES.includes(scope) || SCOPES.indexOf(scope) >= SCOPES.indexOf(needed);
}

// Whether the token in use may make a request that needs scope `needed` (true while unknown).
function may(needed) {
  return scopeAllows(tokenInUse && tokenInUse.info ? tokenInUse.info.scope : null, needed);
}

// What the API says of the token in use (null if it cannot say); asked once per token.
function loadTokenInUse() {
  const token = getToken();
  if (tokenInUse && tokenInUse.token === token) return tokenInUse.ready;
  const entry = { token, info: null };
  tokenInUse = entry;
  showTokenInUse(null, 'pending');
  entry.ready = api('GET', 'v1/token', { token }).then((info) => {
    if (tokenInUse !== entry) return null;
    entry.info = info;
    showTokenInUse(info, info.scope);
    return info;
  }, (error) => {
    if (tokenInUse !== entry) return null; // signed out (401) or another token since
    tokenInUse = null; // asked again on the next page
    showTokenInUse(null, null);
    if (!(error instanceof ApiError && error.status === 404)) reportError(error, 'Loading the token in use');
    return null;
  });
  return entry.ready;
}

function forgetTokenInUse() {
  tokenInUse = null;
  showTokenInUse(null, null);
}

// "token ci-bot (tok_1a2b3c4d5e6f) · scope operate"
function tokenSummary(info) {
  return ['token ', el('strong', { class: 'token-name', text: info.name }), ' (', el('code', { text: info.token_id }),
    ') · scope ', el('span', { class: 'scope-name', text: info.scope })];
}

function showTokenInUse(info, scope) {
  if (scope) document.body.dataset.scope = scope;
  else delete document.body.dataset.scope;
  const where = clear($('#token-in-use'));
  where.hidden = !info;
  if (info) append(where, tokenSummary(info));
}

// --- views and routing ------------------------------------------------------------------------------------

let current = null; // the view shown: { alive, cleanups }

function newView() {
  if (current) {
    current.alive = false;
    for (const cleanup of current.cleanups) cleanup();
  }
  current = { alive: true, cleanups: [] };
  return current;
}

function viewRoot() {
  return clear($('#view'));
}

function reportError(error, where) {
  if (error instanceof SignedOut) return;
  const message = error instanceof ApiError ? error.message : 'Something went wrong in the console.';
  announce(where ? `${where}: ${message}` : message, 'error');
}

function showSignIn(message) {
  newView();
  viewRoot();
  forgetTokenInUse();
  $('#nav').hidden = true;
  $('#sign-in').hidden = false;
  const note = $('#sign-in-message');
  note.hidden = !message;
  note.textContent = message || '';
}

function signOut(message) {
  dropToken();
  showSignIn(message);
  if (message) announce(message, 'error');
}

function highlightNav(name) {
  for (const link of document.querySelectorAll('#nav a[data-route]')) {
    if (link.dataset.route === name) link.setAttribute('aria-current', 'page');
    else link.removeAttribute('aria-current');
  }
}

function parseRoute() {
  const hash = window.location.hash.replace(/^#/, '') || '/jobs';
  const [path, query = ''] = hash.split('?');
  const parts = path.split('/').filter(Boolean);
  return { parts, params: new URLSearchParams(query) };
}

function route({ focus = false } = {}) {
  consumeTokenFragment();
  clearStatus();
  if (!getToken()) {
    showSignIn($('#sign-in-message').textContent || '');
    return;
  }
  $('#sign-in').hidden = true;
  $('#sign-in-message').hidden = true;
  $('#nav').hidden = false;
  loadTokenInUse(); // before the page's own calls (one at a time): its controls know the scope first
  const view = newView();
  const root = viewRoot();
  const { parts, params } = parseRoute();
  let render;
  if (parts[0] === 'jobs' && parts[1]) {
    highlightNav('jobs');
    render = renderJob(view, root, decodeURIComponent(parts[1]));
  } else if (parts[0] === 'new') {
    highlightNav('new');
    render = renderNewJob(view, root);
  } else if (parts[0] === 'team') {
    highlightNav('team');
    render = renderTeam(view, root);
  } else if (parts[0] === 'jobs' || !parts.length) {
    highlightNav('jobs');
    render = renderJobs(view, root, params);
  } else {
    highlightNav('');
    root.append(el('h1', { tabindex: '-1', text: 'Page not found' }),
      el('p', {}, 'No console page here. ', el('a', { href: '#/jobs', text: 'Go to the jobs' })));
    render = Promise.resolve();
  }
  if (focus) {
    const heading = $('h1', root);
    if (heading) heading.focus();
  }
  Promise.resolve(render).catch((error) => reportError(error));
}

function heading(text) {
  return el('h1', { tabindex: '-1', text });
}

function tableWrap(label, table) {
  return el('div', { class: 'table-wrap', role: 'region', 'aria-label': label, tabindex: '0' }, table);
}

// Says what the token in use may not do here: shown (console.css) only when its scope is below `needed`.
function needsNote(needed, text) {
  return el('p', { class: 'notice needs-note', 'data-needs': needed, text });
}

// Rebuilds a container's content while keeping keyboard focus on the "same" control (data-focus-key).
function keepingFocus(container, rebuild) {
  const active = document.activeElement;
  const key = active && container.contains(active) ? active.dataset.focusKey : undefined;
  rebuild();
  if (key) {
    const again = container.querySelector(`[data-focus-key="${CSS.escape(key)}"]`);
    if (again) again.focus();
  }
}

// --- form fields ----------------------------------------------------------------------------------------

function field({ id, label, input, hint, className }) {
  const hintId = hint ? `${id}-hint` : null;
  const errorId = `${id}-error`;
  input.id = id;
  input.dataset.describedby = hintId || '';
  if (hintId) input.setAttribute('aria-describedby', hintId);
  return el('div', { class: `field ${className || ''}`.trim() },
    el('label', { for: id, text: label }),
    input,
    hint ? el('p', { id: hintId, class: 'hint', text: hint }) : null,
    el('p', { id: errorId, class: 'field-error', hidden: true }));
}

function setFieldError(input, message) {
  const error = document.getElementById(`${input.id}-error`);
  if (!error) return false;
  error.textContent = message;
  error.hidden = false;
  input.setAttribute('aria-invalid', 'true');
  input.setAttribute('aria-describedby', [input.dataset.describedby, error.id].filter(Boolean).join(' '));
  return true;
}

function clearFieldErrors(form) {
  for (const input of form.querySelectorAll('[aria-invalid]')) {
    input.removeAttribute('aria-invalid');
    if (input.dataset.describedby) input.setAttribute('aria-describedby', input.dataset.describedby);
    else input.removeAttribute('aria-describedby');
  }
  for (const error of form.querySelectorAll('.field-error')) {
    error.textContent = '';
    error.hidden = true;
  }
}

// The API's message without its leading "field: " (the label already names the field).
function fieldMessage(error) {
  const prefix = error.field ? `${error.field}: ` : '';
  return prefix && error.message.startsWith(prefix) ? error.message.slice(prefix.length) : error.message;
}

// --- jobs list ------------------------------------------------------------------------------------------

async function renderJobs(view, root, params) {
  const filters = {
    q: params.get('q') || '',
    label: params.get('label') || '',
    state: ['active', 'paused'].includes(params.get('state')) ? params.get('state') : 'all',
  };
  const q = el('input', { type: 'search', name: 'q', value: filters.q, autocomplete: 'off' });
  const label = el('input', {
    type: 'text', name: 'label', value: filters.label, autocomplete: 'off', spellcheck: 'false',
    placeholder: 'team:payments',
  });
  const state = el('select', { name: 'state' },
    ['all', 'active', 'paused'].map((value) => el('option', {
      value, selected: value === filters.state, text: value === 'all' ? 'All' : value[0].toUpperCase() + value.slice(1),
    })));
  const form = el('form', { class: 'filters', role: 'search', 'aria-label': 'Filter jobs', novalidate: true },
    field({ id: 'jobs-q', label: 'Search names', input: q, hint: 'Matches the start of any word of a name.' }),
    field({ id: 'jobs-label', label: 'Label', input: label, hint: 'One label as key:value.' }),
    field({ id: 'jobs-state', label: 'State', input: state }),
    el('div', { class: 'field field-button' }, el('button', { type: 'submit', class: 'button', text: 'Apply' })));
  const tbody = el('tbody');
  const table = el('table', { class: 'jobs-table cards' },
    el('caption', { class: 'visually-hidden', text: 'Jobs of your team' }),
    el('thead', {}, el('tr', {},
      ['Name', 'Schedule', 'Labels', 'State', 'Next run', 'Last run'].map((h) => el('th', { scope: 'col', text: h })))),
    tbody);
  const count = el('p', { class: 'muted', id: 'jobs-count' });
  const more = el('button', { type: 'button', class: 'button secondary', id: 'jobs-more', hidden: true, text: 'Load more' });
  root.append(
    el('div', { class: 'title-row' }, heading('Jobs'), el('a', { class: 'button', href: '#/new', 'data-needs': 'admin', text: 'New job' })),
    form, count, tableWrap('Jobs', table), el('p', {}, more));

  let jobs = [];
  let cursor = null;
  let sequence = 0;
  let announceCount = false; // after a filter change, not on the first load

  const rowFor = (job) => {
    const last = job.last_run;
    let lastCell;
    if (last) {
      lastCell = [statusBadge(last.status), ' ', timeEl(last.finished_at || last.scheduled_at)];
    } else if (last === null) {
      lastCell = [el('span', { class: 'muted', text: 'no runs yet' })];
    } else {
      lastCell = [el('span', { class: 'muted', text: '—' })];
    }
    return el('tr', { 'data-job-id': job.id },
      el('th', { scope: 'row', 'data-label': 'Name' }, el('a', { href: `#/jobs/${encodeURIComponent(job.id)}`, text: job.name })),
      el('td', { 'data-label': 'Schedule' }, scheduleSummary(job.schedule)),
      el('td', { 'data-label': 'Labels' }, labelChips(job.labels)),
      el('td', { 'data-label': 'State' }, stateBadge(job.paused)),
      el('td', { 'data-label': 'Next run' }, timeEl(job.next_run_at)),
      el('td', { 'data-label': 'Last run' }, lastCell));
  };

  const show = () => {
    const wanted = filters.state;
    const shown = jobs.filter((job) => wanted === 'all' || (wanted === 'paused') === Boolean(job.paused));
    clear(tbody);
    for (const job of shown) tbody.append(rowFor(job));
    if (!shown.length) {
      let empty = 'No loaded job matches the state filter.';
      if (!jobs.length) empty = may('admin') ? 'No jobs match. Create one with “New job”.' : 'No jobs match.';
      tbody.append(el('tr', {}, el('td', { colspan: '6', class: 'empty', text: empty })));
    }
    const loaded = `${jobs.length} job${jobs.length === 1 ? '' : 's'} loaded`;
    count.textContent = wanted === 'all' ? loaded : `${loaded}, ${shown.length} ${wanted}`;
    more.hidden = !cursor;
  };

  const load = async (reset) => {
    const mine = ++sequence;
    more.disabled = true;
    try {
      const page = await api('GET', 'v1/jobs', {
        query: { limit: 25, last_run: 'true', q: filters.q, label: filters.label, cursor: reset ? null : cursor },
      });
      if (!view.alive || mine !== sequence) return;
      jobs = reset ? page.jobs : jobs.concat(page.jobs);
      cursor = page.next_cursor;
      show();
      if (reset && announceCount) announce(`${count.textContent}.`);
      announceCount = false;
    } catch (error) {
      if (!view.alive || mine !== sequence) return;
      if (error instanceof ApiError && error.status === 422 && (error.field === 'label' || error.field === 'q')) {
        setFieldError(error.field === 'label' ? label : q, fieldMessage(error));
      }
      reportError(error, 'Loading jobs');
    } finally {
      more.disabled = false;
    }
  };

  const keepInAddress = () => {
    const params2 = new URLSearchParams();
    if (filters.q) params2.set('q', filters.q);
    if (filters.label) params2.set('label', filters.label);
    if (filters.state !== 'all') params2.set('state', filters.state);
    const query = params2.toString();
    window.history.replaceState(null, '', `${window.location.pathname}${window.location.search}#/jobs${query ? `?${query}` : ''}`);
  };

  const apply = () => {
    clearFieldErrors(form);
    const wanted = label.value.trim();
    if (wanted && !/^[^:]+:.*$/.test(wanted)) {
      setFieldError(label, 'Write the label as key:value, e.g. team:payments.');
      return;
    }
    const changed = filters.q !== q.value.trim() || filters.label !== wanted;
    filters.q = q.value.trim();
    filters.label = wanted;
    filters.state = state.value;
    keepInAddress();
    announceCount = true;
    if (changed) load(true);
    else {
      show();
      announce(`${count.textContent}.`);
    }
  };

  let typing = null;
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    window.clearTimeout(typing);
    apply();
  });
  q.addEventListener('input', () => {
    window.clearTimeout(typing);
    typing = window.setTimeout(apply, 350);
  });
  state.addEventListener('change', apply);
  more.addEventListener('click', () => load(false));
  view.cleanups.push(() => window.clearTimeout(typing));
  await load(true);
}

// --- new job --------------------------------------------------------------------------------------------

function parseLabels(text) {
  const labels = {};
  for (const raw of text.split(/[\n,]/)) {
    const item = raw.trim();
    if (!item) continue;
    const at = item.indexOf(':');
    if (at <= 0) throw new Error(`“${item}” is not key:value.`);
    const key = item.slice(0, at).trim();
    if (Object.hasOwn(labels, key)) throw new Error(`The label key “${key}” is given twice.`);
    labels[key] = item.slice(at + 1).trim();
  }
  return labels;
}

function localDateTimeValue(date) {
  const pad = (n) => String(n).padStart(2, '0');
  return `${date.getFullYear()}-${pad(date.getMonth() + 1)}-${pad(date.getDate())}T${pad(date.getHours())}:${pad(date.getMinutes())}:${pad(date.getSeconds())}`;
}

function timeZoneNames() {
  try {
    return Intl.supportedValuesOf('timeZone');
  } catch {
    return [];
  }
}

function wholeNumber(input) {
  const n = Number(input.value);
  return input.value.trim() !== '' && Number.isInteger(n) ? n : input.value; // else the API says which field
}

const CALENDARS_HINT = 'Your team’s calendars (duetime calendars create, or POST /v1/calendars); Ctrl or ⌘ selects more than one.';

function calendarSelect(name) {
  return el('select', { name, multiple: true, size: '4' });
}

const selectedValues = (select) => Array.from(select.selectedOptions, (option) => option.value);

// The team's calendars (every page of GET v1/calendars) as the options of each select; a team without one
// is told how to make one.
async function fillCalendarSelects(view, selects) {
  const calendars = [];
  try {
    let cursor = null;
    do {
      const page = await api('GET', 'v1/calendars', { query: { limit: 100, cursor } });
      calendars.push(...page.calendars);
      cursor = page.next_cursor;
    } while (cursor && view.alive);
  } catch (error) {
    if (view.alive) reportError(error, 'Loading the calendars');
    return;
  }
  if (!view.alive) return;
  for (const select of selects) {
    append(select, calendars.map((calendar) => el('option', {
      value: calendar.name, text: calendar.description ? `${calendar.name} (${calendar.description})` : calendar.name,
    })));
    select.dataset.loaded = String(calendars.length);
    if (!calendars.length) {
      const hint = document.getElementById(`${select.id}-hint`);
      if (hint) hint.textContent = 'Your team has no calendars yet: create one with duetime calendars create or POST /v1/calendars.';
    }
  }
}

function choice(name, options) {
  return el('select', { name }, options.map(([value, text]) => el('option', { value, text })));
}

// A cron's excluded dates: which calendars, and what a time on one of their dates does (`exclude`).
function exclusionFields() {
  const calendars = calendarSelect('exclude-calendars');
  const onExcluded = choice('on-excluded', Object.entries(ON_EXCLUDED_TEXT)
    .map(([value, text]) => [value, value === 'skip' ? 'skip (no run)' : `run on the ${text}`]));
  const rolled = choice('rolled', [['once', 'once (one run)'], ['each', 'each (a run per date rolled)']]);
  const part = el('fieldset', { class: 'schedule-part', 'data-kind': 'cron', id: 'job-exclude' },
    el('legend', { text: 'Excluded dates (optional)' }),
    field({ id: 'job-exclude-calendars', label: 'Exclude calendars', input: calendars, hint: `The cron does not run on their dates (in its time zone). ${CALENDARS_HINT}` }),
    field({ id: 'job-on-excluded', label: 'On an excluded date', input: onExcluded, hint: 'Skip the time, or run it at the same wall time on the nearest business day (Monday to Friday, not in the calendars).' }),
    field({ id: 'job-rolled', label: 'Times rolled onto one run', input: rolled, hint: 'When two dates roll onto one day (a long weekend), or onto a day that runs anyway.' }));
  return { part, calendars, onExcluded, rolled };
}

// A schedule of wall times' DST policy (`dst`): "default rule" leaves its side out.
function dstFields() {
  const gap = choice('dst-gap', [
    ['', 'default rule'], ['shift', 'shift: run at the first minute after the gap'], ['skip', 'skip: no run'],
  ]);
  const overlap = choice('dst-overlap', [
    ['', 'default rule'], ['first', 'first: run at its first occurrence'],
    ['last', 'last: run at its second occurrence'], ['both', 'both: run at both'],
  ]);
  const part = el('fieldset', { class: 'schedule-part', 'data-kind': 'cron business_day', id: 'job-dst' },
    el('legend', { text: 'Daylight saving' }),
    el('p', { class: 'hint', text: 'The default rule is Vixie cron’s: a fixed-time schedule shifts and runs the first occurrence; an hourly or more frequent cron skips and runs both.' }),
    el('div', { class: 'inline-fields wide' },
      field({ id: 'job-dst-gap', label: 'Spring-forward gap', input: gap, hint: 'A wall time the clock jumps over.' }),
      field({ id: 'job-dst-overlap', label: 'Fall-back overlap', input: overlap, hint: 'A wall time that happens twice.' })));
  return { part, gap, overlap };
}

// The form's `exclude`: null when nothing is asked. A rule chosen without a calendar is sent as it is, for
// the API to say which field is missing.
function exclusionOf(calendars, onExcluded, rolled) {
  const names = selectedValues(calendars);
  if (!names.length && onExcluded.value === 'skip' && rolled.value === 'once') return null;
  return { calendars: names, on_excluded: onExcluded.value, rolled: rolled.value };
}

// The form's `dst`: only the sides chosen ("default rule" leaves a side out); null for none.
function dstPolicyOf(gap, overlap) {
  const policy = {};
  if (gap.value) policy.gap = gap.value;
  if (overlap.value) policy.overlap = overlap.value;
  return Object.keys(policy).length ? policy : null;
}

async function renderNewJob(view, root) {
  const name = el('input', { type: 'text', name: 'name', required: true, maxlength: '200', autocomplete: 'off' });
  const kinds = [
    ['cron', 'Cron (in a time zone)'],
    ['rate', 'Fixed rate'],
    ['at', 'Once, at a time'],
    ['business_day', 'Business day of the month'],
  ];
  const radios = kinds.map(([value, text], index) => {
    const id = `job-schedule-${value}`;
    const input = el('input', { type: 'radio', name: 'schedule-type', value, id, checked: index === 0 });
    return el('div', { class: 'radio' }, input, el('label', { for: id, text }));
  });
  const cron = el('input', { type: 'text', name: 'cron', placeholder: '0 2 * * *', spellcheck: 'false', autocomplete: 'off' });
  const zoneList = el('datalist', { id: 'job-timezones' }, timeZoneNames().map((zone) => el('option', { value: zone })));
  const timezone = el('input', { type: 'text', name: 'timezone', value: LOCAL_ZONE, list: 'job-timezones', autocomplete: 'off', spellcheck: 'false' });
  const rateCount = el('input', { type: 'number', name: 'rate-count', min: '1', step: '1', value: '5', inputmode: 'numeric' });
  const rateUnit = el('select', { name: 'rate-unit' },
    ['minutes', 'hours', 'days'].map((unit) => el('option', { value: unit, text: unit })));
  const at = el('input', { type: 'datetime-local', name: 'at', step: '1' });
  at.value = localDateTimeValue(new Date(Date.now() + 10 * 60_000));
  const url = el('input', { type: 'url', name: 'url', required: true, placeholder: 'https://example.com/hooks/nightly', spellcheck: 'false', autocomplete: 'off' });
  const method = el('select', { name: 'method' },
    ['POST', 'GET', 'PUT', 'PATCH', 'DELETE'].map((m) => el('option', { value: m, text: m })));
  const requestBody = el('textarea', { name: 'body', rows: '3', spellcheck: 'false' });
  const labels = el('textarea', { name: 'labels', rows: '3', spellcheck: 'false', placeholder: 'team:payments\nenv:prod' });
  const maxAttempts = el('input', { type: 'number', name: 'max-attempts', min: '1', max: '20', step: '1', placeholder: '4', inputmode: 'numeric' });
  const exact = el('input', { type: 'checkbox', name: 'exact', id: 'job-exact' });
  // More options: left empty, the API's defaults apply (each hint says which).
  const jitter = el('input', { type: 'number', name: 'jitter', min: '0', max: '3600', step: '1', placeholder: '300', inputmode: 'numeric' });
  const timeout = el('input', { type: 'number', name: 'timeout', min: '1', max: '600', step: '1', placeholder: '30', inputmode: 'numeric' });
  const overlap = choice('overlap', [
    ['allow', 'Run anyway (runs may overlap)'],
    ['skip', 'Skip the new run'],
    ['buffer_one', 'Queue one run until the previous ends'],
  ]);
  const misfire = choice('misfire', [
    ['run_once', 'One run, for the latest missed time'],
    ['run_all', 'One run per missed time'],
    ['skip', 'None; wait for the next time'],
  ]);
  const businessDay = el('input', { type: 'number', name: 'business-day', min: '-23', max: '23', step: '1', value: '1', inputmode: 'numeric' });
  const businessTime = el('input', { type: 'time', name: 'business-time', value: '09:00' });
  const businessCalendars = calendarSelect('business-calendars');
  const exclusion = exclusionFields();
  const dst = dstFields();
  const { calendars: excludeCalendars, onExcluded, rolled } = exclusion;
  const { gap: dstGap, overlap: dstOverlap } = dst;
  const formError = el('p', { class: 'form-error', id: 'job-form-error', hidden: true });

  const cronPart = el('div', { class: 'schedule-part', 'data-kind': 'cron' },
    field({ id: 'job-cron', label: 'Cron expression', input: cron, hint: 'minute hour day month weekday (also L, 15W, LW, 5L, 1#2, ?), an EventBridge cron(0 9 ? * MON-FRI *), or @daily, @hourly…' }));
  const businessPart = el('div', { class: 'schedule-part', 'data-kind': 'business_day', hidden: true },
    el('div', { class: 'inline-fields' },
      field({ id: 'job-business-day', label: 'Which business day', input: businessDay, hint: '1 the first, 2 the second… −1 the last, −2 the one before it.' }),
      field({ id: 'job-business-time', label: 'Time of day', input: businessTime })),
    field({ id: 'job-business-calendars', label: 'Calendars of days off (optional)', input: businessCalendars, hint: CALENDARS_HINT }));
  const zonePart = el('div', { class: 'schedule-part', 'data-kind': 'cron business_day' },
    field({ id: 'job-timezone', label: 'Time zone', input: timezone, hint: 'An IANA name such as Europe/Berlin.' }),
    zoneList);
  const excludePart = exclusion.part;
  const dstPart = dst.part;
  const ratePart = el('div', { class: 'schedule-part inline-fields', 'data-kind': 'rate', hidden: true },
    field({ id: 'job-rate-count', label: 'Every', input: rateCount }),
    field({ id: 'job-rate-unit', label: 'Unit', input: rateUnit }));
  const atPart = el('div', { class: 'schedule-part', 'data-kind': 'at', hidden: true },
    field({ id: 'job-at', label: 'Run at (your local time)', input: at, hint: `Your time zone: ${LOCAL_ZONE}. Sent to the API in UTC.` }));
  const parts = [cronPart, businessPart, zonePart, ratePart, atPart, excludePart, dstPart];

  const exactError = el('p', { id: 'job-exact-error', class: 'field-error', hidden: true });
  exact.dataset.describedby = 'job-exact-hint';
  exact.setAttribute('aria-describedby', 'job-exact-hint');
  const form = el('form', { id: 'new-job-form', novalidate: true, 'aria-labelledby': 'new-job-title', 'data-needs': 'admin' },
    formError,
    field({ id: 'job-name', label: 'Name', input: name }),
    el('fieldset', {},
      el('legend', { text: 'Schedule' }),
      el('div', { class: 'radios', role: 'radiogroup', 'aria-label': 'Schedule type' }, radios),
      cronPart, businessPart, zonePart, ratePart, atPart),
    excludePart,
    dstPart,
    el('fieldset', {},
      el('legend', { text: 'Target' }),
      field({ id: 'job-url', label: 'URL', input: url, hint: 'The http:// or https:// address duetime calls.' }),
      field({ id: 'job-method', label: 'Method', input: method }),
      field({ id: 'job-body', label: 'Request body (optional)', input: requestBody })),
    field({ id: 'job-labels', label: 'Labels (optional)', input: labels, hint: 'key:value, one per line or separated by commas.' }),
    field({ id: 'job-max-attempts', label: 'Attempts per run (optional)', input: maxAttempts, hint: 'How often a failing call is tried; the API default is 4.' }),
    el('div', { class: 'field checkbox' },
      exact,
      el('label', { for: 'job-exact', text: 'Exact time' }),
      el('p', { id: 'job-exact-hint', class: 'hint', text: 'Runs on the second, without jitter; counts against your team’s exact-time quota.' }),
      exactError),
    el('details', { class: 'more-options', id: 'job-more-options' },
      el('summary', { text: 'More options' }),
      field({ id: 'job-jitter', label: 'Jitter in seconds (optional)', input: jitter, hint: 'Each run starts up to this long after its time, spread out; the API default is 300. Ignored for exact jobs.' }),
      field({ id: 'job-timeout', label: 'Call timeout in seconds (optional)', input: timeout, hint: '1 to 600; the API default is 30.' }),
      field({ id: 'job-overlap', label: 'When the previous run has not finished', input: overlap }),
      field({ id: 'job-misfire', label: 'When runs were missed', input: misfire, hint: 'For times that passed while the job could not run (paused, or the scheduler down).' })),
    el('div', { class: 'actions' }, el('button', { type: 'submit', class: 'button', text: 'Create job' })));
  const title = heading('New job');
  title.id = 'new-job-title';
  root.append(title, needsNote('admin', 'Creating a job needs a token with scope admin; the token in use has '
    + 'less (see the top of the page). Sign in with an admin token to create one.'), form);

  const kind = () => form.querySelector('input[name="schedule-type"]:checked').value;
  const showKind = () => {
    for (const part of parts) part.hidden = !part.dataset.kind.split(' ').includes(kind());
  };
  for (const radio of form.querySelectorAll('input[name="schedule-type"]')) radio.addEventListener('change', showKind);

  const inputFor = {
    name, 'schedule.cron': cron, 'schedule.timezone': timezone, 'schedule.rate': rateCount, 'schedule.at': at,
    'target.url': url, 'target.method': method, 'target.body': requestBody, target: url,
    labels, exact, retry: maxAttempts, 'retry.max_attempts': maxAttempts,
    jitter_seconds: jitter, timeout_seconds: timeout, overlap, misfire,
    'schedule.business_day': businessDay, 'schedule.calendars': businessCalendars,
    exclude: excludeCalendars, 'exclude.calendars': excludeCalendars, 'exclude.on_excluded': onExcluded,
    'exclude.rolled': rolled, dst: dstGap, 'dst.gap': dstGap, 'dst.overlap': dstOverlap,
  };
  const scheduleInput = () => ({ cron, rate: rateCount, at, business_day: businessDay })[kind()];
  // `schedule.at` is the one-time instant, or a business day's time of day.
  const inputAt = (path) => (path === 'schedule.at' && kind() === 'business_day' ? businessTime : inputFor[path]);

  const showError = (fieldName, message) => {
    let input = null;
    for (let path = fieldName || ''; path && !input; path = path.includes('.') ? path.slice(0, path.lastIndexOf('.')) : '') {
      input = path === 'schedule' ? scheduleInput() : inputAt(path) || null;
    }
    if (input && setFieldError(input, message)) {
      const more = input.closest('details');
      if (more) more.open = true; // a refused option is shown, not left folded away
      input.focus();
    } else {
      formError.textContent = message;
      formError.hidden = false;
      formError.setAttribute('tabindex', '-1');
      formError.focus();
    }
    announce(`The job was not created: ${message}`, 'error');
  };

  fillCalendarSelects(view, [businessCalendars, excludeCalendars]);

  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    clearFieldErrors(form);
    formError.hidden = true;
    const spec = { name: name.value.trim(), target: { url: url.value.trim(), method: method.value }, exact: exact.checked };
    const chosen = kind();
    const zone = timezone.value.trim() || 'UTC';
    if (chosen === 'cron') {
      spec.schedule = { cron: cron.value.trim(), timezone: zone };
      const exclude = exclusionOf(excludeCalendars, onExcluded, rolled);
      if (exclude) spec.exclude = exclude;
    } else if (chosen === 'business_day') {
      spec.schedule = {
        business_day: wholeNumber(businessDay), at: businessTime.value, timezone: zone,
        calendars: selectedValues(businessCalendars),
      };
    } else if (chosen === 'rate') {
      const n = rateCount.value.trim();
      spec.schedule = { rate: `${n} ${n === '1' ? rateUnit.value.replace(/s$/, '') : rateUnit.value}` };
    } else {
      const when = at.value ? new Date(at.value) : null;
      spec.schedule = { at: when && !Number.isNaN(when.getTime()) ? when.toISOString().replace('.000Z', 'Z') : at.value };
    }
    if (hasWallTimes(spec.schedule)) {
      const dst = dstPolicyOf(dstGap, dstOverlap);
      if (dst) spec.dst = dst;
    }
    if (requestBody.value.trim()) spec.target.body = requestBody.value;
    try {
      const parsed = parseLabels(labels.value);
      if (Object.keys(parsed).length) spec.labels = parsed;
    } catch (error) {
      showError('labels', error.message);
      return;
    }
    if (maxAttempts.value.trim()) spec.retry = { max_attempts: wholeNumber(maxAttempts) };
    if (jitter.value.trim()) spec.jitter_seconds = wholeNumber(jitter);
    if (timeout.value.trim()) spec.timeout_seconds = wholeNumber(timeout);
    if (overlap.value !== 'allow') spec.overlap = overlap.value;
    if (misfire.value !== 'run_once') spec.misfire = misfire.value;
    const submit = form.querySelector('button[type="submit"]');
    submit.disabled = true;
    announce('Creating the job…');
    try {
      const job = await api('POST', 'v1/jobs', { body: spec });
      if (!view.alive) return;
      announce(`Job “${job.name}” created.`, 'ok', { keep: true });
      window.location.hash = `#/jobs/${encodeURIComponent(job.id)}`;
    } catch (error) {
      if (!view.alive || error instanceof SignedOut) return;
      if (error instanceof ApiError && error.status !== 0) showError(error.field, fieldMessage(error));
      else reportError(error, 'Creating the job');
    } finally {
      submit.disabled = false;
    }
  });
}

// --- one job --------------------------------------------------------------------------------------------

// What daylight saving did to a previewed run (its dst_effect): the badge's words and their explanation.
const DST_BADGES = {
  moved: ['DST moved', 'A daylight-saving change moved this run off its wall-clock time'],
  doubled: ['DST doubled', 'Its wall-clock time happens twice (fall-back) and runs both times'],
  first_only: ['DST first of two', 'Its wall-clock time happens twice (fall-back); only the first runs'],
  last_only: ['DST second of two', 'Its wall-clock time happens twice (fall-back); only the second runs'],
};

// A local date of the API ("2026-12-25") as "Dec 25" (or "Dec 25, 2026") in the browser's language, whatever
// the browser's zone: the date is the schedule zone's, not a moment.
const DAY_MONTH = new Intl.DateTimeFormat(undefined, { day: 'numeric', month: 'short', timeZone: 'UTC' });
const DAY_MONTH_YEAR = new Intl.DateTimeFormat(undefined, { day: 'numeric', month: 'short', year: 'numeric', timeZone: 'UTC' });

function localDateText(day, format = DAY_MONTH) {
  const date = parseInstant(`${day}T00:00:00Z`);
  return date ? format.format(date) : String(day);
}

function rolledBadge(days, exclude) {
  const dates = days.map((day) => localDateText(day)).join(', ');
  const where = exclude && exclude.on_excluded === 'previous_business_day' ? 'the previous' : 'the next';
  const fullDates = days.map((day) => localDateText(day, DAY_MONTH_YEAR)).join(', ');
  const title = `The time of ${fullDates}, excluded by the job’s calendars, runs here instead, on ${where} business day`
    + (days.length > 1 ? ` (rolled runs ${(exclude && exclude.rolled) || 'once'})` : '');
  return el('span', { class: 'badge rolled', title, 'data-rolled-from': days.join(' '), text: `rolled from ${dates}` });
}

// The preview's times on excluded dates: skipped, or rolled to a run (its time in "Instead").
function showExcluded(part, body, excluded) {
  clear(body);
  for (const time of excluded) {
    body.append(el('tr', { 'data-date': time.date, 'data-outcome': time.rolled_to ? 'rolled' : 'skipped' },
      el('td', {}, timeEl(time.scheduled_at)),
      el('td', {}, el('time', { datetime: time.date, text: localDateText(time.date, DAY_MONTH_YEAR) })),
      el('td', {}, calendarNames(time.calendars)),
      el('td', {}, time.holiday || el('span', { class: 'muted', text: 'unnamed' })),
      el('td', {}, time.rolled_to ? ['rolled to ', timeEl(time.rolled_to)] : 'skipped')));
  }
  part.hidden = !excluded.length;
}

// Wall times spring-forward skipped that get no run (the job's DST gap rule): not runs, so not in the table.
function showDstSkipped(part, skipped) {
  clear(part);
  part.hidden = !skipped.length;
  if (!skipped.length) return;
  append(part, [
    el('h3', { id: 'dst-skipped-title', text: 'Wall times daylight saving skipped (no run)' }),
    el('ul', { 'aria-labelledby': 'dst-skipped-title' },
      skipped.map((item) => el('li', {}, el('code', { text: item.wall_time.replace('T', ' ') })))),
  ]);
}

function specOf(job) {
  const spec = { ...job };
  for (const name of SPEC_ONLY_HIDDEN) delete spec[name];
  return spec;
}

async function renderJob(view, root, jobId) {
  const title = heading('Job');
  const summary = el('dl', { class: 'summary' });
  const specPre = el('pre', { class: 'spec', tabindex: '0', 'aria-label': 'Job spec as JSON' });
  const runNow = el('button', { type: 'button', class: 'button', id: 'run-now', 'data-needs': 'operate', text: 'Run now' });
  const pauseButton = el('button', {
    type: 'button', class: 'button secondary', id: 'pause-resume', 'data-needs': 'operate', text: 'Pause',
  });
  const refresh = el('button', { type: 'button', class: 'button secondary', id: 'refresh', text: 'Refresh' });
  const previewBody = el('tbody');
  const previewNote = el('p', { class: 'muted' });
  const excludedBody = el('tbody');
  const excludedPart = el('div', { id: 'excluded-times', hidden: true },
    el('h3', { id: 'excluded-title', text: 'Times on excluded dates' }),
    tableWrap('Times on excluded dates', el('table', { id: 'excluded-table', 'aria-labelledby': 'excluded-title' },
      el('thead', {}, el('tr', {}, ['Scheduled time', 'Date', 'Calendars', 'Holiday', 'Instead'].map((h) => el('th', { scope: 'col', text: h })))),
      excludedBody)));
  const skippedPart = el('div', { id: 'dst-skipped', hidden: true });
  const runsBody = el('tbody');
  const runsNote = el('p', { class: 'muted', id: 'runs-note', text: `Updates every ${RUNS_REFRESH_MS / 1000} s while this page is open.` });
  const firesBody = el('tbody');
  const firesCounts = el('p', { id: 'fires-counts' });
  const firesStrip = el('ol', { class: 'fire-strip', id: 'fires-strip', 'aria-label': 'Fires, oldest first' });
  const firesSection = el('section', { 'aria-labelledby': 'fires-title', id: 'fires' },
    el('h2', { id: 'fires-title', text: 'Fire timeline (last 24 hours)' }),
    el('p', { class: 'muted', text: 'Every time the job should have fired, matched to what happened: on time, late, '
      + 'repeated, skipped (and why), missed (and why) or pending.' }),
    firesCounts, firesStrip,
    tableWrap('Fires', el('table', { id: 'fires-table' },
      el('thead', {}, el('tr', {}, ['Scheduled', 'Fire', 'Late by', 'Why'].map((h) => el('th', { scope: 'col', text: h })))),
      firesBody)));
  const historyBody = el('tbody');
  const historySection = el('section', { 'aria-labelledby': 'history-title', id: 'history' });
  const historyMore = el('button', { type: 'button', class: 'button secondary', hidden: true, text: 'Older changes' });

  root.append(
    el('p', { class: 'breadcrumb' }, el('a', { href: '#/jobs', text: '← All jobs' })),
    title,
    el('div', { class: 'actions', role: 'group', 'aria-label': 'Job actions' }, runNow, pauseButton, refresh),
    needsNote('operate', 'The token in use has scope read: it shows the job and its runs, but running, pausing, '
      + 'retrying or cancelling needs a token with scope operate or admin.'),
    el('section', { 'aria-labelledby': 'summary-title' },
      el('h2', { id: 'summary-title', text: 'Summary' }), summary,
      el('details', { class: 'spec-details' }, el('summary', { text: 'Spec as JSON' }), specPre)),
    el('section', { 'aria-labelledby': 'preview-title' },
      el('h2', { id: 'preview-title', text: 'Next 10 runs' }), previewNote,
      tableWrap('Next runs', el('table', { id: 'preview-table' },
        el('thead', {}, el('tr', {}, ['#', 'Scheduled time', 'Fires at', 'Note'].map((h) => el('th', { scope: 'col', text: h })))),
        previewBody)),
      excludedPart, skippedPart),
    el('section', { 'aria-labelledby': 'runs-title' },
      el('h2', { id: 'runs-title', text: 'Runs' }), runsNote,
      tableWrap('Runs', el('table', { id: 'runs-table', class: 'cards' },
        el('thead', {}, el('tr', {},
          ['Scheduled', 'Status', 'Attempt', 'Lateness', 'Duration', 'Response', 'Actions'].map((h) => el('th', { scope: 'col', text: h })))),
        runsBody))),
    firesSection,
    historySection);
  append(historySection, [
    el('h2', { id: 'history-title', text: 'Change history' }),
    tableWrap('Change history', el('table', { id: 'history-table' },
      el('thead', {}, el('tr', {}, ['When', 'Change', 'By token', 'Fields'].map((h) => el('th', { scope: 'col', text: h })))),
      historyBody)),
    el('p', {}, historyMore),
  ]);

  let job = null;
  let historyCursor = null;

  const showJob = () => {
    title.textContent = job.name;
    document.title = `${job.name} · duetime console`;
    pauseButton.textContent = job.paused ? 'Resume' : 'Pause';
    clear(summary);
    const row = (term, ...value) => [el('dt', { text: term }), el('dd', {}, ...value)];
    append(summary, [
      row('State', stateBadge(job.paused)),
      row('Schedule', scheduleSummary(job.schedule)),
      job.schedule && job.schedule.cron !== undefined
        ? row('Excluded dates', job.exclude ? exclusionText(job.exclude) : el('span', { class: 'muted', text: 'none' }))
        : null,
      hasWallTimes(job.schedule) ? row('Daylight saving', dstText(job.dst)) : null,
      row('Target', el('code', { class: 'wrap', text: targetSummary(job.target) })),
      row('Next run', job.paused ? el('span', { class: 'muted', text: 'none while paused' }) : timeEl(job.next_run_at)),
      row('Exact time', job.exact ? 'yes' : `no (up to ${job.jitter_seconds} s of jitter)`),
      row('Attempts per run', String(job.retry ? job.retry.max_attempts : '—')),
      row('Labels', labelChips(job.labels)),
      row('Key', job.key ? el('code', { class: 'wrap', text: job.key }) : el('span', { class: 'muted', text: 'none' })),
      row('Managed by', job.managed_by
        ? el('span', { title: 'applied from jobs files by duetime apply; an edit here shows as drift at the next apply' },
          el('code', { text: job.managed_by }), ' (duetime apply)')
        : el('span', { class: 'muted', text: 'nothing: made by hand' })),
      row('Job id', el('code', { class: 'wrap', text: job.id })),
      row('Created', timeEl(job.created_at)),
      row('Updated', timeEl(job.updated_at)),
    ]);
    specPre.textContent = JSON.stringify(specOf(job), null, 2);
  };

  const loadPreview = async () => {
    try {
      const preview = await api('GET', `${jobPath(jobId)}/preview`, { query: { count: 10 } });
      if (!view.alive) return;
      clear(previewBody);
      preview.runs.forEach((run, index) => {
        const rolledFrom = run.rolled_from || [];
        previewBody.append(el('tr', {
          'data-dst-shifted': run.dst_shifted ? 'true' : 'false',
          'data-rolled-from': rolledFrom.length ? rolledFrom.join(' ') : null,
        },
        el('td', { text: String(index + 1) }),
        el('td', {}, timeEl(run.nominal_at)),
        el('td', {}, timeEl(run.fire_at)),
        el('td', { class: 'marks' },
          DST_BADGES[run.dst_effect]
            ? el('span', { class: 'badge dst', title: DST_BADGES[run.dst_effect][1], text: DST_BADGES[run.dst_effect][0] })
            : null,
          rolledFrom.length ? rolledBadge(rolledFrom, job && job.exclude) : null)));
      });
      if (!preview.runs.length) {
        previewBody.append(el('tr', {}, el('td', { colspan: '4', class: 'empty', text: 'No more runs are scheduled.' })));
      }
      showExcluded(excludedPart, excludedBody, preview.excluded || []);
      showDstSkipped(skippedPart, preview.skipped || []);
      previewNote.textContent = job && job.paused
        ? 'The job is paused: these times run only if it is resumed before them.' : '';
    } catch (error) {
      reportError(error, 'Loading the next runs');
    }
  };

  const runRow = (run) => {
    const lateness = between(run.fire_at, run.started_at);
    // The call's own duration when the run has a result; else the span its (whole-second) instants give.
    const duration = run.result && Number.isFinite(run.result.duration_ms)
      ? run.result.duration_ms : between(run.started_at, run.finished_at);
    const when = DATE_TIME.format(parseInstant(run.scheduled_at) || new Date());
    const actions = [];
    if (RETRYABLE.has(run.status)) {
      actions.push(el('button', {
        type: 'button', class: 'button small', 'data-action': 'retry', 'data-run-id': run.run_id, 'data-needs': 'operate',
        'data-focus-key': `retry:${run.run_id}`, 'aria-label': `Retry the run scheduled ${when}`, text: 'Retry',
      }));
    }
    if (!TERMINAL.has(run.status)) {
      actions.push(el('button', {
        type: 'button', class: 'button small secondary', 'data-action': 'cancel', 'data-run-id': run.run_id, 'data-needs': 'operate',
        'data-focus-key': `cancel:${run.run_id}`, 'aria-label': `Cancel the run scheduled ${when}`, text: 'Cancel',
      }));
    }
    const result = excerpt(run.result);
    return el('tr', { 'data-run-id': run.run_id, 'data-status': run.status },
      el('td', { 'data-label': 'Scheduled' }, timeEl(run.scheduled_at)),
      el('td', { 'data-label': 'Status' }, statusBadge(run.status)),
      el('td', { 'data-label': 'Attempt', class: 'attempt', text: `${run.attempt} / ${run.max_attempts}` }),
      el('td', { 'data-label': 'Lateness', text: run.started_at ? formatLateness(lateness) : '—' }),
      el('td', { 'data-label': 'Duration', text: run.finished_at && duration !== null ? formatSeconds(duration) : (run.status === 'running' ? 'running…' : '—') }),
      el('td', { 'data-label': 'Response', class: 'excerpt', title: result !== '—' ? result : null, text: result }),
      el('td', { 'data-label': 'Actions', class: 'row-actions' }, actions));
  };

  let runsInFlight = false;
  const loadRuns = async () => {
    if (runsInFlight) return;
    runsInFlight = true;
    try {
      const page = await api('GET', `${jobPath(jobId)}/runs`, { query: { limit: 20 } });
      if (!view.alive) return;
      keepingFocus(runsBody, () => {
        clear(runsBody);
        for (const run of page.runs) runsBody.append(runRow(run));
        if (!page.runs.length) {
          runsBody.append(el('tr', {}, el('td', { colspan: '7', class: 'empty', text: 'No runs yet. “Run now” starts one.' })));
        }
      });
    } catch (error) {
      if (view.alive) reportError(error, 'Loading runs');
    } finally {
      runsInFlight = false;
    }
  };

  const changeText = (value) => (value === undefined ? '—' : JSON.stringify(value));
  const historyRow = (change) => {
    const fields = Object.entries(change.fields || {});
    return el('tr', { 'data-action': change.action },
      el('td', {}, timeEl(change.at)),
      el('td', {}, el('span', { class: `badge action-${change.action}`, text: change.action })),
      el('td', {}, el('code', { text: change.token_id || '—' })),
      el('td', {}, changesCell(fields)));
  };
  const changesCell = (fields) => {
    if (!fields.length) return el('span', { class: 'muted', text: '—' });
    const list = el('ul', { class: 'changes' }, fields.map(([name, diff]) => el('li', {},
      el('code', { text: name }), `: ${changeText(diff && diff.from)} → ${changeText(diff && diff.to)}`)));
    // A creation sets every field: folded, so the table stays readable.
    return fields.length > 4 ? el('details', {}, el('summary', { text: `${fields.length} fields` }), list) : list;
  };

  const loadHistory = async (reset = true) => {
    try {
      const page = await api('GET', `${jobPath(jobId)}/history`, { query: { limit: 20, cursor: reset ? null : historyCursor } });
      if (!view.alive) return;
      historySection.hidden = false;
      if (reset) clear(historyBody);
      for (const change of page.changes) historyBody.append(historyRow(change));
      if (!historyBody.children.length) {
        historyBody.append(el('tr', {}, el('td', { colspan: '4', class: 'empty', text: 'No changes recorded.' })));
      }
      historyCursor = page.next_cursor;
      historyMore.hidden = !historyCursor;
    } catch (error) {
      if (error instanceof ApiError && error.status === 404 && job) {
        historySection.hidden = true; // an API without change history
        return;
      }
      if (view.alive) reportError(error, 'Loading the change history');
    }
  };

  const loadJob = async () => {
    try {
      job = await api('GET', jobPath(jobId));
    } catch (error) {
      if (!view.alive) return false;
      if (error instanceof ApiError && error.status === 404) {
        title.textContent = 'Job not found';
        announce('There is no job with this id in your team.', 'error');
        for (const button of [runNow, pauseButton, refresh]) button.disabled = true;
        return false;
      }
      throw error;
    }
    if (!view.alive) return false;
    showJob();
    return true;
  };

  const busy = async (button, work) => {
    button.disabled = true;
    try {
      await work();
    } catch (error) {
      reportError(error);
    } finally {
      button.disabled = false;
    }
  };

  const FIRES_SHOWN = 50;
  const fireLabel = (fire) => el('span', {
    class: `badge fire-${fire.label}`, text: fire.reason ? `${fire.label}: ${fire.reason}` : fire.label,
  });
  const loadFires = async () => {
    try {
      const ledger = await api('GET', `${jobPath(jobId)}/fires`);
      if (!view.alive) return;
      firesCounts.textContent = Object.entries(ledger.counts).map(([label, n]) => `${label} ${n}`).join(' · ');
      clear(firesStrip);
      for (const fire of ledger.fires) {
        const when = new Date(fire.scheduled_at).toLocaleString();
        firesStrip.append(el('li', {
          class: `fire-${fire.label}`, title: `${when}: ${fire.label}${fire.reason ? ` (${fire.reason})` : ''}`,
          'aria-label': `${when}: ${fire.label}`,
        }));
      }
      clear(firesBody);
      for (const fire of ledger.fires.slice(-FIRES_SHOWN).reverse()) {
        firesBody.append(el('tr', { 'data-label': fire.label },
          el('td', {}, timeEl(fire.scheduled_at)),
          el('td', {}, fireLabel(fire)),
          el('td', { text: fire.late_seconds == null ? '—' : `${Math.round(fire.late_seconds)} s` }),
          el('td', { text: fire.detail || '—' })));
      }
      if (!ledger.fires.length) {
        firesBody.append(el('tr', {}, el('td', { colspan: '4', class: 'empty', text: 'No fires in the last 24 hours.' })));
      }
    } catch (error) {
      if (error instanceof ApiError && error.status === 404 && job) {
        firesSection.hidden = true; // an API without the ledger
        return;
      }
      if (view.alive) reportError(error, 'Loading the fire timeline');
    }
  };

  const refreshAll = async () => {
    if (await loadJob()) await Promise.all([loadPreview(), loadRuns(), loadFires(), loadHistory()]);
  };

  runNow.addEventListener('click', () => busy(runNow, async () => {
    const run = await api('POST', `${jobPath(jobId)}/trigger`);
    announce(`Run started (${STATUS_TEXT[run.status] || run.status}).`, 'ok');
    await loadRuns();
  }));
  pauseButton.addEventListener('click', () => busy(pauseButton, async () => {
    const action = job.paused ? 'resume' : 'pause';
    job = await api('POST', `${jobPath(jobId)}/${action}`);
    if (!view.alive) return;
    showJob();
    announce(job.paused ? 'The job is paused.' : 'The job is active again.', 'ok');
    await Promise.all([loadPreview(), loadFires(), loadHistory()]);
  }));
  refresh.addEventListener('click', () => busy(refresh, async () => {
    await refreshAll();
    announce('Refreshed.');
  }));
  historyMore.addEventListener('click', () => loadHistory(false));
  runsBody.addEventListener('click', (event) => {
    const button = event.target.closest('button[data-action]');
    if (!button) return;
    const runId = button.dataset.runId;
    const action = button.dataset.action;
    busy(button, async () => {
      const run = await api('POST', `${runPath(runId)}/${action}`);
      announce(action === 'retry'
        ? `Retry queued: attempt ${run.attempt} of ${run.max_attempts}.` : 'The run was cancelled.', 'ok');
      await loadRuns();
    });
  });

  const timer = window.setInterval(() => {
    if (document.visibilityState === 'visible') loadRuns();
  }, RUNS_REFRESH_MS);
  view.cleanups.push(() => window.clearInterval(timer));
  const onVisible = () => {
    if (document.visibilityState === 'visible') loadRuns();
  };
  document.addEventListener('visibilitychange', onVisible);
  view.cleanups.push(() => document.removeEventListener('visibilitychange', onVisible));

  await refreshAll();
}

// --- team -----------------------------------------------------------------------------------------------

const BUCKET_MINUTES = 15;

function minuteInstant(minute) {
  // "2026-12-01T14:05" (UTC) -> Date
  return parseInstant(/Z$|[+-]\d\d:?\d\d$/.test(minute) ? minute : `${minute}:00Z`);
}

function bucketize(load, start, end) {
  // Windows on quarter hours (:00, :15, :30, :45); the first and last are cut by the forecast's window.
  const size = BUCKET_MINUTES * 60_000;
  const first = Math.floor(start.getTime() / size) * size;
  const count = Math.ceil((end.getTime() - first) / size);
  const buckets = Array.from({ length: count }, (_, i) => ({
    start: new Date(first + i * size), total: 0, peak: 0, peakAt: null,
  }));
  let peak = { runs: 0, at: null };
  for (const { minute, runs } of load.minutes || []) {
    const at = minuteInstant(minute);
    if (!at) continue;
    const index = Math.floor((at.getTime() - first) / size);
    const bucket = buckets[Math.min(Math.max(index, 0), count - 1)];
    bucket.total += runs;
    if (runs > bucket.peak) {
      bucket.peak = runs;
      bucket.peakAt = at;
    }
    if (runs > peak.runs) peak = { runs, at };
  }
  return { buckets, peak };
}

function niceCeiling(value) {
  if (value <= 5) return Math.max(1, Math.ceil(value));
  const power = 10 ** Math.floor(Math.log10(value));
  for (const step of [1, 2, 2.5, 5, 10]) if (step * power >= value) return step * power;
  return 10 * power;
}

function drawChart(figure, buckets, cap, summaryId) {
  const width = Math.max(280, Math.floor(figure.clientWidth || 640));
  const height = width < 500 ? 180 : 240;
  const highest = Math.max(1, ...buckets.map((b) => b.peak));
  // The cap shares the scale when it is near the bars; far above them it is drawn above the plot, apart from
  // its scale, and says so.
  const capOnScale = cap > 0 && cap <= highest * 3;
  const margin = { top: capOnScale || !cap ? 22 : 44, right: 10, bottom: 28, left: 36 };
  const plotW = width - margin.left - margin.right;
  const plotH = height - margin.top - margin.bottom;
  const top = niceCeiling(capOnScale ? Math.max(highest, cap) * 1.1 : highest * 1.2);
  const y = (value) => margin.top + plotH - (Math.min(value, top) / top) * plotH;
  const slot = plotW / buckets.length;

  const chart = svg('svg', {
    class: 'chart', width, height, viewBox: `0 0 ${width} ${height}`, role: 'img', 'aria-labelledby': summaryId,
    focusable: 'false',
  });
  chart.append(svg('line', { class: 'axis', x1: margin.left, x2: width - margin.right, y1: y(0), y2: y(0) }));
  const ticks = top <= 5 ? Array.from({ length: top + 1 }, (_, i) => i) : [0, top / 2, top].filter(Number.isInteger);
  for (const value of ticks) {
    chart.append(svg('line', { class: 'grid', x1: margin.left, x2: width - margin.right, y1: y(value), y2: y(value) }));
    chart.append(svg('text', { class: 'tick', x: margin.left - 6, y: y(value) + 4, 'text-anchor': 'end', text: String(value) }));
  }
  buckets.forEach((bucket, index) => {
    const x = margin.left + index * slot;
    if (bucket.peak > 0) {
      const bar = svg('rect', {
        class: 'bar', x: (x + 0.5).toFixed(1), y: y(bucket.peak).toFixed(1),
        width: Math.max(1, slot - 1).toFixed(1), height: (y(0) - y(bucket.peak)).toFixed(1),
      });
      bar.append(svg('title', {
        text: `${SHORT_TIME.format(bucket.start)}: busiest minute ${bucket.peak} run${bucket.peak === 1 ? '' : 's'}, ${bucket.total} in 15 minutes`,
      }));
      chart.append(bar);
    }
    // A tick on each local hour divisible by 3 (6 on a narrow chart), away from the edges.
    const every = width >= 500 ? 3 : 6;
    if (bucket.start.getMinutes() === 0 && bucket.start.getHours() % every === 0 && index > 1 && index < buckets.length - 2) {
      chart.append(svg('line', { class: 'tick-mark', x1: x, x2: x, y1: y(0), y2: y(0) + 4 }));
      chart.append(svg('text', { class: 'tick', x, y: height - 8, 'text-anchor': 'middle', text: SHORT_TIME.format(bucket.start) }));
    }
  });
  if (cap > 0) {
    const capY = capOnScale ? y(cap) : 24;
    chart.append(svg('line', { class: 'cap-line', x1: margin.left, x2: width - margin.right, y1: capY, y2: capY }));
    chart.append(svg('text', {
      class: 'cap-label', x: width - margin.right, y: capY - 6, 'text-anchor': 'end',
      text: capOnScale ? `concurrency cap ${cap}` : `concurrency cap ${cap} (far above this scale)`,
    }));
  }
  clear(figure.querySelector('.chart-box')).append(chart);
}

async function renderTeam(view, root) {
  const limits = el('dl', { class: 'summary', hidden: true });
  const quota = el('p', { id: 'quota-text', class: 'quota' });
  const summaryId = 'load-summary';
  const loadSummary = el('p', { id: summaryId });
  const figure = el('figure', { class: 'chart-figure' },
    el('div', { class: 'chart-box' }),
    el('figcaption', { class: 'muted', text: `Each bar: the busiest minute of a ${BUCKET_MINUTES}-minute window, in your local time (${LOCAL_ZONE}). The dashed line is the team’s concurrency cap.` }));
  const tableBody = el('tbody');
  root.append(
    heading('Team'),
    el('section', { 'aria-labelledby': 'limits-title' }, el('h2', { id: 'limits-title', text: 'Limits' }), quota, limits),
    el('section', { 'aria-labelledby': 'load-title' },
      el('h2', { id: 'load-title', text: 'The next 24 hours' }), loadSummary, figure,
      el('details', {}, el('summary', { text: 'The chart as a table' }),
        tableWrap('Due runs per window', el('table', { id: 'load-table' },
          el('caption', { text: `${BUCKET_MINUTES}-minute windows with runs due (others have none)` }),
          el('thead', {}, el('tr', {}, ['Window', 'Runs due', 'Busiest minute'].map((h) => el('th', { scope: 'col', text: h })))),
          tableBody)))));
  const tokensSection = el('section', { id: 'tokens', 'aria-labelledby': 'tokens-title', hidden: true });
  root.append(tokensSection);

  const start = new Date(Math.floor(Date.now() / 60_000) * 60_000);
  const end = new Date(start.getTime() + 24 * 3600_000);
  const iso = (date) => date.toISOString().replace('.000Z', 'Z');
  const [teamResult, loadResult] = await Promise.allSettled([
    api('GET', 'v1/team'),
    api('GET', 'v1/load', { query: { from: iso(start), to: iso(end) } }),
  ]);
  const inUse = await loadTokenInUse();
  if (!view.alive) return;
  if (inUse && inUse.scope === 'admin') renderTokens(view, tokensSection);

  let cap = 0;
  if (teamResult.status === 'fulfilled') {
    const team = teamResult.value;
    cap = team.max_concurrency;
    quota.textContent = `${team.exact_jobs} of ${team.exact_quota} exact-time jobs`;
    const meter = el('meter', { min: '0', max: String(team.exact_quota || 1), value: String(team.exact_jobs), 'aria-labelledby': 'quota-text' });
    quota.after(meter);
    const row = (term, ...value) => [el('dt', { text: term }), el('dd', {}, ...value)];
    limits.hidden = false;
    append(limits, [
      row('Team', teamLabel(team)),
      row('Token in use', inUse ? tokenSummary(inUse) : el('span', { class: 'muted', text: 'not known' })),
      row('Jobs', `${team.jobs} of ${team.max_jobs}`),
      row('Exact-time jobs', `${team.exact_jobs} of ${team.exact_quota}`),
      row('Concurrency cap', `${team.max_concurrency} runs at once`),
      row('AWS role', team.aws_role_arn
        ? el('code', { class: 'wrap', text: team.aws_role_arn })
        : el('span', { class: 'muted', text: 'none registered' })),
      row('AWS external id', team.aws_external_id
        ? el('code', { class: 'wrap', text: team.aws_external_id })
        : el('span', { class: 'muted', text: 'assigned when a role is registered' })),
    ]);
  } else if (!(teamResult.reason instanceof SignedOut)) {
    quota.textContent = 'The team’s limits are not available from this API.';
    reportError(teamResult.reason, 'Loading the team');
  }

  if (loadResult.status !== 'fulfilled') {
    loadSummary.textContent = 'The load forecast could not be loaded.';
    reportError(loadResult.reason, 'Loading the forecast');
    return;
  }
  const load = loadResult.value;
  const { buckets, peak } = bucketize(load, start, end);
  clear(loadSummary);
  if (peak.runs > 0) {
    append(loadSummary, [
      `${load.total} run${load.total === 1 ? ' is' : 's are'} due in the next 24 hours. Busiest minute: `,
      el('span', { id: 'peak-text', text: `${peak.runs} run${peak.runs === 1 ? '' : 's'}` }), ' at ',
      timeEl(iso(peak.at)), '.',
      cap ? ` The concurrency cap is ${cap} runs at once${peak.runs > cap ? ': that minute is over it, some runs will wait' : ''}.` : '',
    ]);
  } else {
    append(loadSummary, ['No runs are due in the next 24 hours.', cap ? ` The concurrency cap is ${cap} runs at once.` : '']);
  }
  for (const bucket of buckets.filter((b) => b.total > 0)) {
    tableBody.append(el('tr', {},
      el('td', {}, timeEl(iso(bucket.start), DAY_TIME)),
      el('td', { text: String(bucket.total) }),
      el('td', {}, `${bucket.peak} at `, timeEl(iso(bucket.peakAt), SHORT_TIME))));
  }
  if (!tableBody.children.length) tableBody.append(el('tr', {}, el('td', { colspan: '3', class: 'empty', text: 'No runs due.' })));

  const draw = () => drawChart(figure, buckets, cap, summaryId);
  draw();
  let resizing = null;
  const onResize = () => {
    window.clearTimeout(resizing);
    resizing = window.setTimeout(() => view.alive && draw(), 150);
  };
  window.addEventListener('resize', onResize);
  view.cleanups.push(() => {
    window.removeEventListener('resize', onResize);
    window.clearTimeout(resizing);
  });
}

// --- the team's tokens (an admin token's Team page) --------------------------------------------------------

const SCOPE_HINT = 'read: every GET but signing keys and tokens; operate: also run, pause, resume, backfill, '
  + 'retry and cancel; admin: everything (jobs, team settings, signing keys, tokens).';

async function renderTokens(view, section) {
  const tbody = el('tbody');
  const name = el('input', { type: 'text', name: 'token-name', required: true, maxlength: '64', autocomplete: 'off', spellcheck: 'false', placeholder: 'ci-deploy' });
  const scope = el('select', { name: 'token-scope' }, SCOPES.map((value) => el('option', { value, text: value })));
  const formError = el('p', { class: 'form-error', id: 'issue-token-error', hidden: true });
  const submit = el('button', { type: 'submit', class: 'button', text: 'Issue token' });
  const form = el('form', { id: 'issue-token-form', novalidate: true, 'aria-labelledby': 'issue-token-title' },
    formError,
    field({ id: 'token-name', label: 'Token name', input: name, hint: 'Unique in your team, e.g. ci-deploy: letters, digits, space and . _ : @ / -' }),
    field({ id: 'token-scope', label: 'Scope', input: scope, hint: SCOPE_HINT }),
    el('div', { class: 'actions' }, submit));
  const issued = el('div', { id: 'issued-token', class: 'issued', role: 'group', 'aria-labelledby': 'issued-token-title', hidden: true });
  append(clear(section), [
    el('h2', { id: 'tokens-title', text: 'Tokens' }),
    el('p', { class: 'muted', text: 'Your team’s API tokens: never the tokens themselves, only their names, ids and scopes.' }),
    tableWrap('Tokens', el('table', { id: 'tokens-table', class: 'cards' },
      el('thead', {}, el('tr', {}, ['Name', 'Id', 'Scope', 'Issued', 'Actions'].map((h) => el('th', { scope: 'col', text: h })))),
      tbody)),
    el('h3', { id: 'issue-token-title', text: 'Issue a token' }), issued, form,
  ]);
  section.hidden = false;

  const rowFor = (token) => el('tr', { 'data-token-id': token.token_id, 'data-in-use': token.in_use ? 'true' : 'false' },
    el('th', { scope: 'row', 'data-label': 'Name' }, el('span', { class: 'token-name', text: token.name }),
      token.in_use ? [' ', el('span', { class: 'badge in-use', text: 'in use', title: 'The token this tab is signed in with' })] : null),
    el('td', { 'data-label': 'Id' }, el('code', { text: token.token_id })),
    el('td', { 'data-label': 'Scope' }, el('span', { class: `badge scope-${token.scope}`, text: token.scope })),
    el('td', { 'data-label': 'Issued' }, timeEl(token.created_at),
      token.created_by ? el('span', { class: 'muted' }, ' by ', el('code', { text: token.created_by })) : null),
    el('td', { 'data-label': 'Actions', class: 'row-actions' }, el('button', {
      type: 'button', class: 'button small secondary', 'data-action': 'revoke', 'data-focus-key': `revoke:${token.token_id}`,
      'aria-label': `Revoke the token ${token.name}`, text: 'Revoke', onclick: () => revoke(token),
    })));

  const load = async () => {
    try {
      const list = await api('GET', 'v1/tokens');
      if (!view.alive) return;
      keepingFocus(tbody, () => {
        clear(tbody);
        for (const token of list.tokens) tbody.append(rowFor(token));
      });
    } catch (error) {
      if (view.alive) reportError(error, 'Loading the tokens');
    }
  };

  async function revoke(token) {
    const choice = await ask({
      id: 'revoke-token',
      title: `Revoke the token ${token.name}?`,
      text: [`Requests with the token ${token.name} (${token.token_id}) are refused from the next one on. `,
        token.in_use ? 'It is the token this tab is signed in with: the console signs out. ' : '',
        'This cannot be undone.'],
      choices: [['keep', 'Keep it', 'button secondary'], ['revoke', 'Revoke', 'button']],
      fallback: 'keep',
    });
    if (choice !== 'revoke' || !view.alive) return;
    try {
      await api('DELETE', `v1/tokens/${encodeURIComponent(token.token_id)}`);
      if (!view.alive) return;
      announce(`The token ${token.name} (${token.token_id}) is revoked.`, 'ok');
      await load();
    } catch (error) {
      if (!view.alive || error instanceof SignedOut) return;
      if (error instanceof ApiError && error.status !== 0) announce(`The token was not revoked: ${fieldMessage(error)}`, 'error');
      else reportError(error, 'Revoking the token');
    }
  }

  const showIssued = (token) => {
    const value = el('input', { type: 'text', id: 'issued-token-value', readonly: true, spellcheck: 'false', autocomplete: 'off', 'aria-describedby': 'issued-token-note' });
    value.value = token.token;
    const copy = el('button', { type: 'button', class: 'button small secondary', text: 'Copy' });
    copy.addEventListener('click', async () => {
      value.select();
      try {
        await navigator.clipboard.writeText(value.value);
        announce('The token is copied.', 'ok');
      } catch {
        announce('The token could not be copied here: it is selected, copy it with the keyboard.', 'info');
      }
    });
    append(clear(issued), [
      el('p', { id: 'issued-token-title', class: 'issued-title' }, 'Issued: ', tokenSummary(token)),
      el('p', { id: 'issued-token-note', text: 'Copy the token now: it is shown this once, and duetime keeps only its hash.' }),
      el('div', { class: 'issued-value' }, el('label', { for: 'issued-token-value', class: 'visually-hidden', text: 'The new token' }), value, copy),
    ]);
    issued.hidden = false;
    value.focus();
    value.select();
  };

  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    clearFieldErrors(form);
    formError.hidden = true;
    issued.hidden = true;
    clear(issued);
    submit.disabled = true;
    try {
      const token = await api('POST', 'v1/tokens', { body: { name: name.value.trim(), scope: scope.value } });
      if (!view.alive) return;
      name.value = '';
      showIssued(token);
      announce(`The token ${token.name} is issued with scope ${token.scope}. Copy it now: it is shown this once.`, 'ok');
      await load();
    } catch (error) {
      if (!view.alive || error instanceof SignedOut) return;
      if (!(error instanceof ApiError) || error.status === 0) {
        reportError(error, 'Issuing the token');
        return;
      }
      const input = { name, scope }[error.field];
      if (!input || !setFieldError(input, fieldMessage(error))) {
        formError.textContent = error.message;
        formError.hidden = false;
      }
      announce(`The token was not issued: ${fieldMessage(error)}`, 'error');
    } finally {
      submit.disabled = false;
    }
  });

  await load();
}

// --- start ----------------------------------------------------------------------------------------------

function start() {
  $('#sign-in-form').addEventListener('submit', (event) => {
    event.preventDefault();
    const input = $('#token-input');
    const token = input.value.trim();
    input.value = '';
    if (!token) {
      showSignIn('Enter your team’s API token.');
      input.focus();
      return;
    }
    setToken(token);
    announce('Signed in.', 'ok', { keep: true });
    route({ focus: true });
  });
  $('#sign-out').addEventListener('click', () => {
    dropToken();
    showSignIn('You are signed out.');
    announce('Signed out.', 'ok');
    $('#token-input').focus();
  });
  window.addEventListener('hashchange', () => route({ focus: true }));
  route();
}

start();
