"""Projects: the scene, its undo history, view, chat and episode links in one `.mwproj` file."""
