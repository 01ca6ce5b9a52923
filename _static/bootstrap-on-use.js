/* Bootstrap (the theme's scripts/bootstrap.js, 81 KB) loaded when a reader first needs it, not on every first visit.
 *
 * On the book's pages Bootstrap does four things, none of them on an unscrolled first screen: it opens the
 * header's menus (download, launch: data-bs-toggle="dropdown"), shows the header buttons' tooltips
 * (data-bs-toggle="tooltip"), and shows and runs the "back to top" button once the reader has scrolled.
 * The build (_ext/page_assets.py) turns the theme's <script src=".../bootstrap.js"> into
 * <script type="text/plain" data-book-on-use src=...> (a script of that type is never fetched) and drops its
 * preload link. This script fetches it (the same file, as the theme wrote its address) as soon as:
 *   - the pointer comes over, or the focus comes to, a Bootstrap control (before the click or the
 *     tooltip's delay, so these work as before);
 *   - the reader scrolls (the back-to-top button appears when scrolling back up);
 *   - the reader clicks a menu's button first (a touch screen has no hover): the click is held
 *     and the menu opened once Bootstrap has arrived;
 *   - the page has been loaded and quiet (no resource has arrived for 1.5 s, then an idle moment), so a
 *     first tap on a slow network does not wait for it. That is after the first load as
 *     benchmarks/site_weight.py measures it (its end: no request started for 0.5 s after ``load``).
 * If Bootstrap cannot be fetched (the connection dropped after the page loaded), a held menu is opened
 * (and closed again on the next click) by setting Bootstrap's own classes on it, so no tap is lost.
 * Once loaded, Bootstrap sets itself up as it would have at start-up (the theme's set-up runs at once
 * when the page is already parsed), and a tooltip whose button is still under the pointer or focused
 * is shown, since Bootstrap missed the event that would have shown it.
 * Loaded as a plain script in the head (Jupyter Book adds every file of _static/): it only listens.
 */
(function () {
  "use strict";

  var loading = false, loaded = false, heldMenu = null, handOpen = null;

  // A menu opened without Bootstrap: its button and list get the classes Bootstrap's Dropdown would set.
  function showByHand(toggle, show) {
    var list = toggle.parentElement && toggle.parentElement.querySelector(".dropdown-menu");
    toggle.classList.toggle("show", show);
    toggle.setAttribute("aria-expanded", show ? "true" : "false");
    if (list) list.classList.toggle("show", show);
    handOpen = show ? toggle : null;
  }

  function load() {
    if (loading) return;
    var held = document.querySelector('script[type="text/plain"][data-book-on-use]');
    if (!held) return;
    loading = true;
    var script = document.createElement("script");
    script.src = held.getAttribute("src");
    script.onload = function () {
      loaded = true;
      var bootstrap = window.bootstrap;
      if (!bootstrap) return;
      if (heldMenu) {
        bootstrap.Dropdown.getOrCreateInstance(heldMenu).toggle();
        heldMenu = null;
      }
      document.querySelectorAll('[data-bs-toggle="tooltip"]').forEach(function (el) {
        if (el.matches(":hover") || el.matches(":focus-visible")) {
          var tip = bootstrap.Tooltip.getInstance(el);
          if (tip) tip.show();
        }
      });
    };
    script.onerror = function () {
      loading = false; // tried again on the next use
      script.remove();
      if (heldMenu) showByHand(heldMenu, true);
      heldMenu = null;
    };
    document.head.appendChild(script);
  }

  function onControl(event) {
    if (event.target.closest && event.target.closest("[data-bs-toggle]")) load();
  }

  document.addEventListener("pointerover", onControl, true);
  document.addEventListener("focusin", onControl, true);
  document.addEventListener(
    "click",
    function (event) {
      if (loaded || !event.target.closest) return;
      var menu = event.target.closest('[data-bs-toggle="dropdown"]');
      if (handOpen) {  // a click anywhere closes a menu opened by hand, as Bootstrap's would close
        var wasOpen = handOpen;
        showByHand(wasOpen, false);
        if (menu === wasOpen) { event.preventDefault(); return; }
      }
      if (!menu) return;
      event.preventDefault();
      heldMenu = menu;
      load();
    },
    true
  );
  window.addEventListener("scroll", function first() {
    window.removeEventListener("scroll", first);
    load();
  });
  window.addEventListener("load", function () {
    var seen = -1, quiet = 0;
    var poll = setInterval(function () {
      var now = performance.getEntriesByType("resource").length;
      quiet = now === seen ? quiet + 250 : 0;
      seen = now;
      if (quiet < 1500) return;
      clearInterval(poll);
      if (window.requestIdleCallback) window.requestIdleCallback(load, { timeout: 2000 });
      else load();
    }, 250);
  });
})();
