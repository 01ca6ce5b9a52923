// Sidebar toggles that work at every width.
//
// pydata-sphinx-theme 0.17 and sphinx-book-theme 1.3 bind their "menu" and "contents" handlers to
// the FIRST .primary-toggle / .secondary-toggle of the page, which is a copy inside the top bar
// (#pst-header) that the book theme never shows. The copies are removed here, before those scripts
// run (this file is deferred and sits in <head>; the themes' own scripts run later), so both themes
// bind to the buttons a reader sees: a drawer below 992 px, collapsing the sidebar above.
document.querySelectorAll("#pst-header .sidebar-toggle").forEach((button) => button.remove());
