// repertory web UI: the live feed of a session page (server-sent events) and nothing else.
// Pages work without this file; with it, a running turn streams in and the page refreshes its
// conversation and panel when the run comes to rest. EventSource reconnects by itself and sends
// Last-Event-ID (the seq of the last durable event), so the server resumes right after it.
(function () {
  "use strict";
  function start() {
    var box = document.getElementById("session");
    if (!box || !window.EventSource) return;
    var live = document.getElementById("live");
    var text = document.getElementById("live-text");
    var reasoning = document.getElementById("live-reasoning");
    var state = document.getElementById("live-state");
    var source = new EventSource(box.dataset.live);
    window.repertoryLive = source;

    // Each fragment (conversation, panel) reloads on its own, and the newest request's answer wins.
    // Not htmx.ajax: without a source element every htmx.ajax call queues on <body>, and a request
    // queued there while another is in flight replaces the one queued before it, so a panel reload
    // could drop the conversation reload that a turn's start had asked for (its input never showed).
    var asked = {};
    function refresh(url, id, merge) {
      var n = (asked[id] || 0) + 1;
      asked[id] = n;
      fetch(url, { credentials: "same-origin", headers: { "HX-Request": "true" } })
        .then(function (r) { return r.ok && !r.redirected ? r.text() : null; })
        .then(function (html) {
          var target = document.getElementById(id);
          if (html === null || asked[id] !== n || !target) return;  // a newer reload is on its way
          var holder = document.createElement("div");
          holder.innerHTML = html;  // rendered and escaped by the server's templates
          var fresh = holder.querySelector("#" + id);
          if (!fresh) return;
          if (merge && merge(target, fresh)) return;
          target.replaceWith(fresh);
          if (window.htmx) window.htmx.process(fresh);  // its forms (decisions, fork) post through htmx
        })
        .catch(function () { /* offline: the next event or a reconnect reloads it */ });
    }

    // The conversation is reloaded from its first message that may still change (a call without
    // its result, an approval waiting, an input not yet in the history) on: the server sends what
    // follows the last settled one, never the whole conversation again.
    function settledUpTo() {
      var after = "";
      var shown = document.querySelectorAll("#conversation > article[data-revision]");
      for (var i = 0; i < shown.length; i++) {
        if (shown[i].hasAttribute("data-open") || !shown[i].dataset.revision) break;
        after = shown[i].dataset.revision;
      }
      return after;
    }
    function reloadConversation() {
      var after = settledUpTo();
      var url = box.dataset.conversation + (after ? "?after=" + encodeURIComponent(after) : "");
      refresh(url, "conversation", function (target, fresh) {
        if (!after || fresh.dataset.after !== after) return false;  // not a tail: replace the whole
        var keep = true;
        Array.prototype.slice.call(target.children).forEach(function (node) {
          if (node.tagName !== "ARTICLE") return;
          if (!keep) node.remove();
          else if (node.dataset.revision === after) keep = false;  // the tail after it is replaced
        });
        Array.prototype.slice.call(fresh.children).forEach(function (node) {
          target.appendChild(node);
          if (window.htmx) window.htmx.process(node);
        });
        return true;
      });
    }
    function clearLive() {
      text.textContent = "";
      reasoning.textContent = "";
      reasoning.parentElement.hidden = true;
      live.hidden = true;
    }
    document.body.addEventListener("repertory-panel", function () { refresh(box.dataset.panel, "panel"); });
    source.addEventListener("open", function () { state.textContent = "Live."; box.dataset.connected = "1"; });
    source.addEventListener("error", function () { state.textContent = "Reconnecting…"; box.dataset.connected = "0"; });
    source.addEventListener("delta", function (e) {
      live.hidden = false;
      text.textContent += JSON.parse(e.data).text;
    });
    // The reply being written will never be completed (the server died, the run was cancelled):
    // its text goes; a reply asked again streams in after this.
    source.addEventListener("retract", function () { clearLive(); });
    source.addEventListener("reasoning", function (e) {
      live.hidden = false;
      reasoning.parentElement.hidden = false;
      reasoning.textContent += JSON.parse(e.data).text;
    });
    source.addEventListener("items", function (e) {
      // What the log just committed is newer than any conversation reload still on its way: a reload
      // read before this commit (its history without the turn's input, its turn row already past
      // showing it) must not replace what these items add.
      asked.conversation = (asked.conversation || 0) + 1;
      var conversation = document.getElementById("conversation");
      var holder = document.createElement("div");
      // Rendered and escaped by the server's templates, like the page itself.
      holder.innerHTML = JSON.parse(e.data).html;
      var empty = conversation.querySelector(":scope > .empty");
      if (empty) empty.remove();
      // A running turn's input shown from its turn row: the checkpoint's messages now hold it.
      Array.prototype.slice.call(conversation.querySelectorAll(":scope > .pending")).forEach(function (n) { n.remove(); });
      Array.prototype.slice.call(holder.children).forEach(function (node) {
        if (!node.id || !document.getElementById(node.id)) conversation.appendChild(node);
      });
      clearLive();
    });
    source.addEventListener("status", function (e) {
      var data = JSON.parse(e.data);
      state.textContent = data.type === "turn.started" ? "Running…" : data.rest ? "At rest." : state.textContent;
      if (data.rest) {
        clearLive();
        reloadConversation();
        refresh(box.dataset.panel, "panel");
      } else if (data.type === "turn.started") {
        reloadConversation();  // shows the turn's input from its turn row
        refresh(box.dataset.panel, "panel");
      }
    });
    source.addEventListener("refused", function (e) {
      // Too many streams open for this key: stop here (no reconnecting) and say why.
      source.close();
      box.dataset.connected = "0";
      state.textContent = JSON.parse(e.data).message;
    });
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
