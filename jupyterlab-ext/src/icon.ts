/** The panel's icon: a medical cross in a circle (the debugger already uses the bug). */

import { LabIcon } from '@jupyterlab/ui-components';

const SVG =
  '<svg xmlns="http://www.w3.org/2000/svg" width="16" height="16" viewBox="0 0 24 24">' +
  '<path class="jp-icon3" fill="#616161" fill-rule="evenodd" ' +
  'd="M12 2a10 10 0 1 0 0 20a10 10 0 1 0 0-20zM10.5 6.5h3v4h4v3h-4v4h-3v-4h-4v-3h4z"/></svg>';

export const torchdoctorIcon = new LabIcon({ name: 'jupyterlab-torchdoctor:icon', svgstr: SVG });
