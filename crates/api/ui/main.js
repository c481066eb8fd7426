// Entry point: theme, views (#/chat, #/dashboard), and the API key prompt shown when the
// server answers 401 (with --api-key). The key is kept in this browser's local storage only.

import { apiKey, request, setApiKey, whenUnauthorized } from "./api.js";
import { $ } from "./dom.js";
import { initDashboard, refreshPool, startDashboard, stopDashboard } from "./dashboard.js";
import { refreshModels } from "./models.js";
import { initPlayground } from "./playground.js";
import { initRaw } from "./raw.js";

const THEME = "sluice.theme";

function applyTheme(choice) {
  if (choice === "light" || choice === "dark") document.documentElement.dataset.theme = choice;
  else delete document.documentElement.dataset.theme;
}

function route() {
  const dashboard = location.hash === "#/dashboard";
  $("view-chat").hidden = dashboard;
  $("view-dashboard").hidden = !dashboard;
  $("nav-chat").toggleAttribute("aria-current", !dashboard);
  $("nav-dashboard").toggleAttribute("aria-current", dashboard);
  if (dashboard) $("nav-dashboard").setAttribute("aria-current", "page");
  else $("nav-chat").setAttribute("aria-current", "page");
  document.title = dashboard ? "sluice · dashboard" : "sluice · playground";
  if (dashboard) startDashboard();
  else stopDashboard();
}

function setMode(raw) {
  $("mode-chat").setAttribute("aria-selected", String(!raw));
  $("mode-raw").setAttribute("aria-selected", String(raw));
  $("mode-chat").tabIndex = raw ? -1 : 0;
  $("mode-raw").tabIndex = raw ? 0 : -1;
  $("chat-pane").hidden = raw;
  $("raw-pane").hidden = !raw;
}

function askForKey(reason) {
  const dialog = $("key-dialog");
  $("key-button").hidden = false;
  $("key-error").textContent = reason || "";
  if (!dialog.open) {
    $("key-input").value = apiKey();
    dialog.showModal();
  }
}

async function keySubmitted(event) {
  event.preventDefault();
  setApiKey($("key-input").value.trim());
  try {
    await request("/v1/models");
  } catch (e) {
    $("key-error").textContent = e.status === 401 ? "The server refused this key." : e.message;
    return;
  }
  $("key-dialog").close();
  await refreshModels().catch(() => {});
  if (!$("view-dashboard").hidden) refreshPool();
}

async function main() {
  const theme = localStorage.getItem(THEME) || "auto";
  $("theme").value = theme;
  applyTheme(theme);
  $("theme").addEventListener("change", () => {
    localStorage.setItem(THEME, $("theme").value);
    applyTheme($("theme").value);
  });

  // With --admin-key the dashboard needs that key, and the server's message says so.
  whenUnauthorized((e) => askForKey(e.code === "invalid_admin_key" ? e.message
    : apiKey() ? "The stored key was refused." : ""));
  $("key-form").addEventListener("submit", keySubmitted);
  $("key-button").addEventListener("click", () => askForKey(""));
  $("key-forget").addEventListener("click", () => {
    setApiKey("");
    $("key-input").value = "";
    $("key-error").textContent = "Key forgotten.";
  });
  if (apiKey()) $("key-button").hidden = false;

  $("mode-chat").addEventListener("click", () => setMode(false));
  $("mode-raw").addEventListener("click", () => setMode(true));
  // Arrow keys move between the two mode tabs, as in any tab list.
  for (const tab of [$("mode-chat"), $("mode-raw")]) {
    tab.addEventListener("keydown", (e) => {
      if (e.key !== "ArrowLeft" && e.key !== "ArrowRight") return;
      const raw = tab.id === "mode-chat";
      setMode(raw);
      (raw ? $("mode-raw") : $("mode-chat")).focus();
    });
  }
  setMode(false);
  // At phone width the settings start folded so the conversation is what one sees first.
  if (window.matchMedia("(max-width: 760px)").matches) $("view-chat").querySelector(".settings details").open = false;

  initDashboard();
  initRaw();
  window.addEventListener("hashchange", route);
  route();
  await initPlayground();
  document.body.dataset.ready = "true";
}

main();
