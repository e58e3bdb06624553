from storpath.cli import main

raise SystemExit(main())
