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
 *     and the menu opened once Bootstrap has arrived.
 * Once loaded, Bootstrap sets itself up as it would have at start-up (the theme's set-up runs at once
 * when the page is already parsed), and a tooltip whose button is still under the pointer or focused
 * is shown, since Bootstrap missed the event that would have shown it.
 * Loaded as a plain script in the head (Jupyter Book adds every file of _static/): it only listens.
 */
(function () {
  "use strict";

  var loading = false, loaded = false, heldMenu = null;

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
      var menu = !loaded && event.target.closest && event.target.closest('[data-bs-toggle="dropdown"]');
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
})();
