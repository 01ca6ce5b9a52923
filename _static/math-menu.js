/* MathJax's contextual menu (Show Math As, Copy, Math Settings, Accessibility), loaded on first use.
 *
 * The book loads MathJax's components without `ui/menu` (_config.yml): 426 KB that few readers
 * use. This script keeps it one right-click or key press away:
 *   - every typeset formula is focusable (tabindex 0), as the menu makes it, so a keyboard reader
 *     can reach a formula (and scroll a wide one, _static/fit.js) before the menu exists;
 *   - the first right-click on a formula, or Space on a focused one (the menu's own key), loads
 *     `ui/menu`, gives the page's MathJax document the menu (MathJax's MenuHandler, applied to the
 *     document and its formulas in place, as its own menu does when it loads an a11y component),
 *     and repeats the event, so the menu opens where the reader asked for it;
 *   - a reader who has saved menu settings (MathJax keeps them in localStorage) gets the menu at
 *     start-up, so that MathJax applies those settings from the first formula, as before.
 * Loaded as a plain script in the head after MathJax's configuration and before MathJax itself
 * (which is deferred), so it can still add to that configuration.
 */
(function () {
  "use strict";

  var config = window.MathJax;
  if (!config || config.version) return; // no MathJax on this page, or MathJax already running

  var SETTINGS = "MathJax-Menu-Settings";
  function hasSavedSettings() {
    try {
      return window.localStorage.getItem(SETTINGS) !== null;
    } catch (e) {
      return false;
    }
  }

  config.loader = config.loader || {};
  var load = (config.loader.load = config.loader.load || []);
  if (hasSavedSettings()) {
    if (load.indexOf("ui/menu") < 0) load.push("ui/menu");
    return; // MathJax sets the menu up itself
  }

  function mathItems(doc) {
    var items = [];
    for (var item of doc.math) items.push(item);
    return items;
  }

  // A formula that MathJax has typeset (not a lazy one still waiting, nor escaped text).
  function typeset(item, STATE) {
    return item.state() >= STATE.TYPESET && !item.isEscaped && !item.lazyCompile && !item.lazyTypeset &&
      item.typesetRoot && item.typesetRoot.nodeName.toLowerCase() === "mjx-container";
  }

  function focusable(item) {
    item.typesetRoot.setAttribute("tabindex", "0");
  }

  var ready = config.startup && config.startup.ready;
  config.startup = config.startup || {};
  config.startup.ready = function () {
    if (ready) ready();
    else window.MathJax.startup.defaultReady();
    var mj = window.MathJax, STATE = mj._.core.MathItem.STATE, doc = mj.startup.document;
    // After the formula is typeset and its assistive MathML added, where the menu would attach.
    doc.addRenderAction("bookFocusable", STATE.TYPESET + 20,
      function (document) {
        mathItems(document).forEach(function (item) {
          if (typeset(item, STATE)) focusable(item);
        });
      },
      function (item) {
        if (typeset(item, STATE)) focusable(item);
      });
  };

  var upgraded = null;

  // Give the running document MathJax's menu: what MenuHandler's document and item mixins would have
  // done had ui/menu been loaded at start-up.
  function addMenu() {
    var mj = window.MathJax, STATE = mj._.core.MathItem.STATE, doc = mj.startup.document;
    if (doc.menu) return doc;
    var handler = mj._.ui.menu.MenuHandler, Menu = mj._.ui.menu.Menu.Menu;
    var MenuDocument = handler.MenuMathDocumentMixin(doc.constructor);
    Object.setPrototypeOf(doc, MenuDocument.prototype);
    mj._.util.Options.defaultOptions(doc.options, {
      enableMenu: true, MenuClass: Menu, menuOptions: MenuDocument.OPTIONS.menuOptions,
      sre: MenuDocument.OPTIONS.sre, a11y: MenuDocument.OPTIONS.a11y,
      enableEnrichment: true, enableComplexity: true, enableExplorer: true, enrichSpeech: "none",
    });
    if (!MenuDocument.ProcessBits.has("context-menu")) MenuDocument.ProcessBits.allocate("context-menu");
    doc.menu = new Menu(doc, doc.options.menuOptions);
    var MenuItem = handler.MenuMathItemMixin(doc.options.MathItem);
    doc.options.MathItem = MenuItem;
    doc.addRenderAction("addMenu", STATE.CONTEXT_MENU);
    doc.addRenderAction("checkLoading", STATE.UNPROCESSED + 1);
    mathItems(doc).forEach(function (item) {
      Object.setPrototypeOf(item, MenuItem.prototype);
      if (typeset(item, STATE)) {
        doc.menu.addMenu(item);
        if (item.state() < STATE.CONTEXT_MENU) item.state(STATE.CONTEXT_MENU);
      }
    });
    doc.processed.set("context-menu");
    return doc;
  }

  // Load the menu (once) and give it to the document; resolves when formulas have their menus.
  window.bookMathMenu = function () {
    if (!upgraded) {
      upgraded = window.MathJax.startup.promise
        .then(function () {
          return window.MathJax.loader.load("ui/menu");
        })
        .then(addMenu);
      upgraded.catch(function () {
        upgraded = null;
      });
    }
    return upgraded;
  };

  function formulaOf(event) {
    var target = event.target;
    var container = target && target.closest && target.closest("mjx-container");
    var mj = window.MathJax;
    if (!container || !mj.startup || !mj.startup.document || mj.startup.document.menu) return null;
    return container;
  }

  // Ask again once the menu is there, on the same formula: the right-click is repeated; for the key,
  // the menu is posted as its own key handler would (a script cannot make a key event with a key code).
  // Meanwhile the formula shows a progress cursor (the browser's own menu is held back).
  function repeat(container, event) {
    var style = container.style, cursor = style.cursor;
    style.cursor = "progress";
    var done = function () { style.cursor = cursor; };
    window.bookMathMenu().then(function (doc) {
      done();
      if (event.type === "contextmenu") {
        container.dispatchEvent(new MouseEvent("contextmenu", {
          clientX: event.clientX, clientY: event.clientY, screenX: event.screenX, screenY: event.screenY,
          button: 2, buttons: 2, bubbles: true, cancelable: true }));
        return;
      }
      var item = mathItems(doc).filter(function (math) { return math.typesetRoot === container; })[0];
      if (!item) return;
      doc.menu.menu.mathItem = item;
      doc.menu.menu.post(event);
    }, done);
  }

  document.addEventListener("contextmenu", function (event) {
    var container = formulaOf(event);
    if (!container) return;
    event.preventDefault();
    repeat(container, event);
  }, true);

  document.addEventListener("keydown", function (event) {
    if (event.key !== " " && event.keyCode !== 32) return;
    var container = formulaOf(event);
    if (!container) return;
    event.preventDefault();
    repeat(container, event);
  }, true);
})();
