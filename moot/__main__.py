from moot.cli import main

raise SystemExit(main())
